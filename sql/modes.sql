-- monotonic (t >= stored) against strict (t > stored).

CREATE TABLE mono (id int PRIMARY KEY, v text);
CREATE TABLE strict_t (id int PRIMARY KEY, v text);
INSERT INTO mono VALUES (1, 'a');
INSERT INTO strict_t VALUES (1, 'a');
SELECT fencing.protect('mono');
SELECT fencing.protect('strict_t', mode => 'strict');
SELECT * FROM fencing.protected_tables WHERE relation IN ('mono'::regclass, 'strict_t'::regclass)
ORDER BY relation::text;

-- Both accept a first write under token 5.
UPDATE mono SET v = 'b', last_fencing_token = 5;
UPDATE strict_t SET v = 'b', last_fencing_token = 5;
-- The same token again: monotonic accepts, strict refuses (one write per grant).
UPDATE mono SET v = 'c', last_fencing_token = 5;
UPDATE strict_t SET v = 'c', last_fencing_token = 5;
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fenced_update('mono', '{"id": 1}', 5, '{"v": "d"}');
SELECT fencing.fenced_update('strict_t', '{"id": 1}', 5, '{"v": "d"}');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fenced_update('strict_t', '{"id": 1}', 5, '{"v": "d"}', on_stale => 'skip');
-- A newer token: both accept.
SELECT fencing.fenced_update('strict_t', '{"id": 1}', 6, '{"v": "e"}');
-- An older token: both refuse.
SELECT fencing.fenced_update('mono', '{"id": 1}', 4, '{"v": "f"}', on_stale => 'skip');
SELECT fencing.fenced_update('strict_t', '{"id": 1}', 4, '{"v": "f"}', on_stale => 'skip');
SELECT 'mono' AS t, * FROM mono UNION ALL SELECT 'strict', * FROM strict_t;

-- Switching mode re-protects in place.
SELECT fencing.protect('mono', mode => 'strict');
SELECT fencing.fenced_update('mono', '{"id": 1}', 5, '{"v": "g"}', on_stale => 'skip');
SELECT * FROM fencing.protected_tables WHERE relation = 'mono'::regclass;
SELECT count(*) AS guards FROM pg_trigger WHERE tgrelid = 'mono'::regclass;

-- The comparison itself, exposed for SQL.
SELECT stored, presented, fencing.token_accepts(stored, presented, false) AS monotonic,
       fencing.token_accepts(stored, presented, true) AS strict
FROM (VALUES (0, 1), (5, 4), (5, 5), (5, 6), (NULL, 1)) v(stored, presented);

DROP TABLE mono, strict_t;
