-- Generations across systems: a database that comes back to a system it
-- lived on before (dumped there, restored on another system that issued
-- higher generations, dumped again and restored on the first system) issues
-- tokens above every generation any system recorded, not by the base its
-- own old rows recorded.
\set regress_db :DBNAME
CREATE DATABASE fencing_generations;
\c fencing_generations
CREATE EXTENSION fencing;
SELECT system_identifier AS sys FROM pg_control_system() \gset
SELECT timeline_id AS tl FROM pg_control_checkpoint() \gset
-- This system issued generation tl + 1 (base 1) here; then system 42, where
-- the data went, issued up to generation tl + 10.
INSERT INTO fencing.token_timelines VALUES
	(:sys, :tl, 1, now(), :tl + 1),
	(42, 1, 2, now(), :tl + 9),
	(42, 2, 3, now(), :tl + 10);
SELECT fencing.acquire('g:1', 'a', '1 min') AS t1 \gset
SELECT (:t1 >> 42) - 512 > :tl + 10 AS above_other_systems,
       (:t1 >> 42) - 512 - :tl = :tl + 11 AS base_above_every_generation;
-- The row of this (system, timeline) now records the generation it issues:
-- a dump restored on system 42 again goes above it.
SELECT generation = (:t1 >> 42) - 512 AS recorded_generation, first_token = 1 AS first_token_kept
FROM fencing.token_timelines WHERE system_identifier = :sys AND timeline = :tl;
-- Later grants stay in that generation.
SELECT fencing.acquire('g:2', 'a', '1 min') AS t2 \gset
SELECT :t2 > :t1 AS increases, :t2 >> 42 = :t1 >> 42 AS same_generation;
SELECT count(*) AS rows_kept FROM fencing.token_timelines;

-- Rows of this system alone: its base, recorded by the row of its lowest
-- timeline or any other (the highest wins), is kept.
\c :regress_db
DROP DATABASE fencing_generations;
CREATE DATABASE fencing_generations;
\c fencing_generations
CREATE EXTENSION fencing;
INSERT INTO fencing.token_timelines VALUES (:sys, :tl, 1, now(), :tl + 4);
SELECT fencing.acquire('g:3', 'a', '1 min') AS t3 \gset
SELECT (:t3 >> 42) - 512 - :tl AS own_base;

\c :regress_db
DROP DATABASE fencing_generations;
