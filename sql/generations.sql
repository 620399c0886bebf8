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

-- 0.2.0's objects served by this library (before ALTER EXTENSION UPDATE):
-- after a pg_upgrade there (a new system), tokens still go above the
-- generations the old system issued, which 0.2.0's rows carry in their first
-- token only; the update records those generations.  System 42 issued
-- generation tl + 5 on its timeline tl + 4 with this library, and 0.2.0's
-- clock tokens on timeline 1.
CREATE DATABASE fencing_generations;
\c fencing_generations
CREATE EXTENSION fencing VERSION '0.2.0';
INSERT INTO fencing.token_timelines VALUES
	(42, 1, 1700000000000000, now()),
	(42, :tl + 4, ((512 + :tl + 5)::bigint << 42) + 1000, now());
SELECT fencing.acquire('g:4', 'a', '1 min') AS t4 \gset
SELECT (:t4 >> 42) - 512 > :tl + 5 AS above_old_system;
ALTER EXTENSION fencing UPDATE TO '0.3.0';
SELECT system_identifier = :sys AS this_system, timeline - :tl AS timeline_minus_tl,
       generation - :tl AS generation_minus_tl
FROM fencing.token_timelines ORDER BY 1, 2;
SELECT fencing.acquire('g:5', 'a', '1 min') AS t5 \gset
SELECT :t5 > :t4 AS increases, :t5 >> 42 = :t4 >> 42 AS same_generation;
-- On to the current release (from 0.3.0): the generations recorded stay,
-- tokens go on in the same one.
ALTER EXTENSION fencing UPDATE;
SELECT system_identifier = :sys AS this_system, timeline - :tl AS timeline_minus_tl,
       generation - :tl AS generation_minus_tl
FROM fencing.token_timelines ORDER BY 1, 2;
SELECT fencing.acquire('g:6', 'a', '1 min') AS t6 \gset
SELECT :t6 > :t5 AS increases, :t6 >> 42 = :t5 >> 42 AS same_generation;

\c :regress_db
DROP DATABASE fencing_generations;
