-- fenced_update(): values converted to column types, composite and quoted
-- keys, unprotected tables, and the skip mode.

CREATE TABLE "Ledger" (
	"Tenant" text,
	"Entry No" int,
	amount numeric(12,2),
	paid boolean,
	tags text[],
	doc jsonb,
	due timestamptz,
	note text,
	last_fencing_token bigint NOT NULL DEFAULT 0,
	PRIMARY KEY ("Tenant", "Entry No")
);
INSERT INTO "Ledger" ("Tenant", "Entry No", amount) VALUES ('acme', 1, 10), ('acme', 2, 20), ('Acme', 1, 30);
SELECT fencing.protect('"Ledger"');

-- Every JSON kind lands in its column type; JSON null sets NULL.
SELECT fencing.fenced_update('"Ledger"', '{"Tenant": "acme", "Entry No": 1}', 7,
	'{"amount": 12.5, "paid": true, "tags": "{a,b}", "doc": {"k": [1, 2]},
	  "due": "2026-12-01 10:00+00", "note": null}');
SELECT * FROM "Ledger" ORDER BY "Tenant", "Entry No";
-- A json/jsonb column takes the JSON value itself (a string stays a string);
-- an array column takes a JSON array, or an array literal in a string.
SELECT fencing.fenced_update('"Ledger"', '{"Tenant": "acme", "Entry No": 2}', 7,
	'{"doc": "plain string", "tags": ["x", "y \"z\"", null]}');
SELECT doc, jsonb_typeof(doc), tags, array_length(tags, 1), tags[3] IS NULL AS third_is_null
FROM "Ledger" WHERE "Tenant" = 'acme' AND "Entry No" = 2;
SELECT fencing.fenced_update('"Ledger"', '{"Tenant": "acme", "Entry No": 2}', 7,
	'{"doc": "[1, 2]", "tags": "{p,q}"}');
SELECT doc, jsonb_typeof(doc), tags FROM "Ledger" WHERE "Tenant" = 'acme' AND "Entry No" = 2;
SELECT t.error_of($$SELECT fencing.fenced_update('"Ledger"', '{"Tenant": "acme", "Entry No": 2}', 7,
	'{"tags": [[1], 2]}')$$);

-- The key value may be given as a string or a number: it is converted to the column type.
SELECT fencing.fenced_update('"Ledger"', '{"Tenant": "acme", "Entry No": "2"}', 7, '{"note": "second"}');
-- Keys are case-sensitive: "Acme" is another tenant.
SELECT fencing.fenced_update('"Ledger"', '{"Entry No": 1, "Tenant": "Acme"}', 3, '{"note": "other"}');
SELECT "Tenant", "Entry No", note, last_fencing_token FROM "Ledger" ORDER BY "Tenant", "Entry No";

-- No changes: only the token advances.
SELECT fencing.fenced_update('"Ledger"', '{"Tenant": "acme", "Entry No": 1}', 8);
SELECT last_fencing_token FROM "Ledger" WHERE "Tenant" = 'acme' AND "Entry No" = 1;

-- Stale: error by default, false with on_stale => 'skip', and the row is unchanged.
SELECT fencing.fenced_update('"Ledger"', '{"Tenant": "acme", "Entry No": 1}', 6, '{"note": "late"}');
SELECT fencing.fenced_update('"Ledger"', '{"Tenant": "acme", "Entry No": 1}', 6, '{"note": "late"}', 'skip');
SELECT note, last_fencing_token FROM "Ledger" WHERE "Tenant" = 'acme' AND "Entry No" = 1;

-- A missing row: P0002, even with on_stale => 'skip'.
SELECT fencing.fenced_update('"Ledger"', '{"Tenant": "acme", "Entry No": 9}', 6, '{}', 'skip');

-- A table that is not protected but has last_fencing_token is fenced as monotonic.
CREATE TABLE plain (id bigint PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
INSERT INTO plain VALUES (1, 'a');
SELECT fencing.fenced_update('plain', '{"id": 1}', 5, '{"v": "b"}');
SELECT fencing.fenced_update('plain', '{"id": 1}', 5, '{"v": "c"}');
SELECT fencing.fenced_update('plain', '{"id": 1}', 4, '{"v": "d"}', 'skip');
SELECT * FROM plain;
-- A custom token column is found through the guard's settings.
CREATE TABLE custom (id int PRIMARY KEY, v text);
INSERT INTO custom VALUES (1, 'a');
SELECT fencing.protect('custom', 'epoch', 'strict');
SELECT fencing.fenced_update('custom', '{"id": 1}', 2, '{"v": "b"}');
SELECT fencing.fenced_update('custom', '{"id": 1}', 2, '{"v": "c"}', 'skip');
SELECT t.error_of($$SELECT fencing.fenced_update('custom', '{"id": 1}', 3, '{"epoch": 9}')$$);
SELECT * FROM custom;

-- Generated columns and NOT NULL keep their own errors.
CREATE TABLE gen (id int PRIMARY KEY, a int, b int GENERATED ALWAYS AS (a * 2) STORED,
                  last_fencing_token bigint NOT NULL DEFAULT 0);
INSERT INTO gen (id, a) VALUES (1, 1);
SELECT fencing.fenced_update('gen', '{"id": 1}', 1, '{"a": 21}');
SELECT t.error_of($$SELECT fencing.fenced_update('gen', '{"id": 1}', 2, '{"b": 1}')$$);
SELECT * FROM gen;

-- Called inside a larger transaction, it is part of it: a rollback undoes it.
BEGIN;
SELECT fencing.fenced_update('plain', '{"id": 1}', 100, '{"v": "rolled back"}');
ROLLBACK;
SELECT * FROM plain;

-- A row that accepts the token but that a trigger skips is not "missing".
CREATE TABLE quiet (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
CREATE TRIGGER z_quiet BEFORE UPDATE ON quiet FOR EACH ROW
	EXECUTE FUNCTION suppress_redundant_updates_trigger();
INSERT INTO quiet VALUES (1, 'a', 5);
SELECT fencing.fenced_update('quiet', '{"id": 1}', 6, '{"v": "b"}');
SELECT fencing.fenced_update('quiet', '{"id": 1}', 6, '{"v": "b"}');
\echo :LAST_ERROR_SQLSTATE

-- JSON null is converted as a plain UPDATE's NULL would be: a domain's NOT
-- NULL and CHECK constraints apply (23502, 23514) and nothing changes.
CREATE DOMAIN required_text AS text NOT NULL;
CREATE DOMAIN short_or_null AS text CHECK (VALUE IS NOT NULL AND length(VALUE) < 5);
CREATE TABLE typed (id int PRIMARY KEY, a required_text, b short_or_null,
	last_fencing_token bigint NOT NULL DEFAULT 0);
INSERT INTO typed VALUES (1, 'x', 'y', 1);
SELECT fencing.fenced_update('typed', '{"id": 1}', 2, '{"a": null}');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fenced_update('typed', '{"id": 1}', 2, '{"b": null}');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.fenced_update('typed', '{"id": 1}', 2, '{"b": "longer"}');
\echo :LAST_ERROR_SQLSTATE
UPDATE typed SET a = NULL WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM typed;
SELECT fencing.fenced_update('typed', '{"id": 1}', 2, '{"a": "z", "b": "w"}');
SELECT * FROM typed;

DROP TABLE "Ledger", plain, custom, gen, quiet, typed;
DROP DOMAIN required_text, short_or_null;
