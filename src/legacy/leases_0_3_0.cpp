/*
 * 0.3.0's lease rows: see leases_0_3_0.hpp.  The column
 * fencing.resources.grace_until comes with 0.4.0's objects (ALTER EXTENSION
 * UPDATE adds it); until then a lease is held until its expires_at.
 */
#include "legacy/leases_0_3_0.hpp"
#include "legacy/installed_release.hpp"

extern "C" {
#include "catalog/pg_type.h"
}

namespace fencing
{

bool lease_rows_without_grace()
{
	return objects_before_0_4_0();
}

Statement renew_0_3_0 = {
    "UPDATE fencing.resources r SET expires_at = c.now + $4"
    " FROM (SELECT pg_catalog.clock_timestamp() AS now) c"
    " WHERE r.resource = $1 AND r.holder = $2 AND r.token = $3 AND NOT r.released"
    " AND r.expires_at > c.now RETURNING true",
    6,
    {TEXTOID, TEXTOID, INT8OID, INTERVALOID, BOOLOID, INTERVALOID}};

Statement release_0_3_0 = {
    "UPDATE fencing.resources r SET released = true"
    " FROM (SELECT pg_catalog.clock_timestamp() AS now) c"
    " WHERE r.resource = $1 AND r.holder = $2 AND r.token = $3 AND NOT r.released"
    " AND r.expires_at > c.now",
    3,
    {TEXTOID, TEXTOID, INT8OID}};

/* 0.3.0 has _grant_token() in schema fencing. */
Statement grant_free_0_3_0 = {
    "UPDATE fencing.resources r"
    " SET holder = $2, released = false,"
    " token = fencing._grant_token(pg_catalog.int8larger(COALESCE(r.token, 0),"
    "  COALESCE((SELECT pg_catalog.max(f.token) FROM fencing.resource_floors f"
    "   WHERE pg_catalog.starts_with($1, f.prefix)), 0)), $4),"
    " (granted_at, expires_at) = (SELECT c.now, c.now OPERATOR(pg_catalog.+) $3"
    " FROM (SELECT pg_catalog.clock_timestamp() AS now) c)"
    " WHERE r.resource OPERATOR(pg_catalog.=) $1"
    " AND (r.released OR r.expires_at IS NULL"
    "  OR r.expires_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp())"
    " RETURNING r.token",
    5,
    {TEXTOID, TEXTOID, INTERVALOID, INT8OID, INTERVALOID}};

Statement grant_0_3_0 = {"UPDATE fencing.resources"
                         " SET holder = $2, token = $3, released = false,"
                         " (granted_at, expires_at) = (SELECT now, now + $4 FROM"
                         " (SELECT pg_catalog.clock_timestamp() AS now) c)"
                         " WHERE resource = $1",
                         5,
                         {TEXTOID, TEXTOID, INT8OID, INTERVALOID, INTERVALOID}};

Statement live_lease_0_3_0 = {
    "SELECT holder = $2, token, expires_at FROM fencing.resources"
    " WHERE resource = $1 AND NOT released AND expires_at > pg_catalog.clock_timestamp()",
    2,
    {TEXTOID, TEXTOID}};

Statement renew_all_0_3_0 = {
    "WITH wanted AS (SELECT w.resource, w.token, w.n"
    "  FROM ROWS FROM (pg_catalog.unnest($2::pg_catalog.text[]),"
    "   pg_catalog.unnest($3::pg_catalog.int8[])) WITH ORDINALITY AS w(resource, token, n)),"
    " renewed AS (UPDATE fencing.resources r"
    "  SET expires_at = c.now OPERATOR(pg_catalog.+) $4"
    "  FROM wanted w, (SELECT pg_catalog.clock_timestamp() AS now) c"
    "  WHERE r.resource OPERATOR(pg_catalog.=) w.resource"
    "   AND r.holder OPERATOR(pg_catalog.=) $1 AND r.token OPERATOR(pg_catalog.=) w.token"
    "   AND NOT r.released"
    "   AND r.expires_at OPERATOR(pg_catalog.>) c.now"
    "  RETURNING r.resource, r.expires_at, true AS advanced)"
    " SELECT w.resource, w.token, n.resource IS NOT NULL, n.expires_at, n.advanced"
    " FROM wanted w LEFT JOIN renewed n ON n.resource OPERATOR(pg_catalog.=) w.resource"
    " ORDER BY w.n",
    6,
    {TEXTOID, TEXTARRAYOID, INT8ARRAYOID, INTERVALOID, BOOLOID, INTERVALOID}};

Statement lock_lease_0_3_0 = {
    "SELECT NOT released AND expires_at > pg_catalog.clock_timestamp(), token,"
    " (SELECT pg_catalog.max(f.token) FROM fencing.resource_floors f"
    " WHERE pg_catalog.starts_with($1, f.prefix))"
    " FROM fencing.resources WHERE resource = $1 FOR UPDATE",
    1,
    {TEXTOID}};

const char *const resource_batch_sql_0_3_0 =
    "WITH batch AS MATERIALIZED ("
    " SELECT ctid, resource FROM fencing.resources WHERE resource OPERATOR(pg_catalog.>) $2"
    "  ORDER BY resource LIMIT $4),"
    " taken AS MATERIALIZED ("
    " SELECT r.ctid FROM fencing.resources r"
    "  WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM batch))"
    "  AND pg_catalog.starts_with(r.resource, $1)"
    "  AND COALESCE(r.token, 0) OPERATOR(pg_catalog.<) $3"
    "  AND NOT (NOT r.released AND r.expires_at OPERATOR(pg_catalog.>) "
    "pg_catalog.clock_timestamp())"
    "  AND EXISTS (SELECT FROM fencing.resource_floors f"
    "   WHERE pg_catalog.starts_with(r.resource, f.prefix) AND f.token OPERATOR(pg_catalog.>=) $3)"
    "  FOR UPDATE OF r SKIP LOCKED),"
    " gone AS ("
    " DELETE FROM fencing.resources r"
    "  WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM taken))"
    "  AND COALESCE(r.token, 0) OPERATOR(pg_catalog.<) $3"
    "  RETURNING 1)"
    " SELECT (SELECT resource FROM batch ORDER BY resource DESC LIMIT 1),"
    " (SELECT pg_catalog.count(*) FROM gone)";

} // namespace fencing
