/*
 * The decision of a guarded write, in one place: what the guard (and
 * fenced_update()) does with a write, as a pure function of plain facts.
 *
 * A write's fate depends on the table's options (report-only or enforcing,
 * max_token, strict or monotonic), the transaction's fencing.maintenance,
 * the token the write presents (its own, fencing.token's, or the one the
 * other half of the same write lent: guard.cpp), the stored token it must
 * follow (the row's, its key's mark, the table's floor) and, after the
 * unique check, whether a concurrent DELETE moved the key's mark.  The guard
 * gathers those facts (the PostgreSQL calls are all there), calls decide(),
 * and carries the decision out: raises the rule's error, records the report,
 * writes the token.  decide() makes no PostgreSQL call, raises nothing and
 * is tested by a table of cases (test/boundary/decision_test.cpp).
 */
#pragma once

#include "base/token_compare.hpp"

namespace fencing
{

/* Which firing of the guard decides. */
enum class Operation {
	insert,   /* BEFORE INSERT: its key's mark and the floor are checked after the unique check */
	update,   /* BEFORE UPDATE */
	remove,   /* BEFORE DELETE */
	truncate, /* BEFORE TRUNCATE: a DELETE of every row */
	new_key   /* AFTER INSERT, or AFTER UPDATE that changed the key: the key's mark */
};

struct WriteFacts {
	Operation operation;
	Mode mode;
	bool enforce;     /* false: the table is report-only */
	int64 max_token;  /* the table's ceiling; 0: none */
	bool maintenance; /* fencing.maintenance is on (the role is checked when carried out) */
	bool has_token;   /* the write presents a token; new_key: always */
	int64 presented;  /* that token (new_key: the row's) */
	/*
	 * The token the write must follow: the row's or the table's floor if
	 * higher (update, remove); its key's mark or the floor (insert, read
	 * only when insert_follows_mark()); the highest token of the table
	 * (truncate); the key's mark (new_key, 0 if none).
	 */
	int64 stored;
	/*
	 * The other half of this write reported (or maintained) it already: the
	 * upsert's INSERT, for its UPDATE; a moved row's UPDATE, for its DELETE.
	 */
	bool lent_reported;
	/*
	 * update: the UPDATE assigns the token column this token, neither
	 * fencing.token's (`presented`) nor the row's own (a write-back); 0: none.
	 */
	int64 second_token;
	bool has_mark;    /* new_key: the key has a mark */
	bool kept_insert; /* new_key: the BEFORE INSERT kept this very mark (maintenance.hpp) */
};
FENCING_PLAIN_DATA(WriteFacts);

enum class Verdict {
	accept,  /* the write goes on with `token` */
	refuse,  /* the rule's error */
	report,  /* report-only: accepted, reported for the rule, keeps the stored token */
	maintain /* a maintenance write: accepted if the role may, keeps the stored token */
};

enum class Rule {
	none,
	stale,      /* 23T01: the token does not follow the stored one */
	missing,    /* 23T02: no token */
	above_max,  /* 22023: above the table's max_token, in both modes */
	mark_moved, /* 40001, report-only: a concurrent DELETE raised the mark this row kept */
	two_tokens, /* 22023: an UPDATE assigns a second token, which fencing.token could follow */
	lent        /* the other half of the write reported it: kept, not reported again */
};

struct Decision {
	Verdict verdict;
	Rule rule;
	int64 token;      /* the token the row, the mark or the floor gets */
	bool counted;     /* counted as accepted in fencing.stats */
	bool note_insert; /* insert: tell the AFTER trigger the row kept its key's mark */
};
FENCING_PLAIN_DATA(Decision);

/* The decision; pure. */
Decision decide(const WriteFacts &facts);

/*
 * Does an INSERT's decision read its key's mark (`stored`)?  Only where it
 * keeps the stored token (report-only, maintenance) or may: an enforcing
 * guard leaves the mark to the AFTER trigger.
 */
bool insert_follows_mark(const WriteFacts &facts);

/* "accept", "stale", ...: for messages and the table test. */
const char *verdict_name(Verdict verdict);
const char *rule_name(Rule rule);

} // namespace fencing
