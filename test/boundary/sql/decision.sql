-- The guard's decision (src/guard/decision.hpp), checked against its table
-- of cases (decision_test.cpp): the number of cases, or the first that fails.
CREATE FUNCTION decision_table() RETURNS integer
AS '$libdir/fencing_boundary_test', 'decision_table' LANGUAGE C;
SELECT decision_table() AS cases;
