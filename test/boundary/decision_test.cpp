/*
 * The table test of the guard's decision (src/guard/decision.hpp): each case
 * is a write's facts and the decision decide() must make of them, covering
 * report-only x maintenance x max_token x strict/monotonic x lent halves x
 * the AFTER trigger's mark.  decision_table() checks every case and returns
 * how many passed; a case that fails raises an error naming it.
 */
#include "guard/decision.hpp"

extern "C" {
#include "utils/builtins.h"
}

using namespace fencing;

namespace
{

constexpr Mode mono = Mode::monotonic;
constexpr Mode strict = Mode::strict;
constexpr bool enforcing = true, report_only = false;
constexpr int64 none = 0;

/* A write presenting `presented` (0: no token) against `stored`. */
WriteFacts write(Operation operation, Mode mode, bool enforce, int64 max_token, int64 presented,
                 int64 stored)
{
	WriteFacts f{};
	f.operation = operation;
	f.mode = mode;
	f.enforce = enforce;
	f.max_token = max_token;
	f.has_token = presented != 0;
	f.presented = presented;
	f.stored = stored;
	return f;
}

WriteFacts maintenance(WriteFacts f)
{
	f.maintenance = true;
	return f;
}

/* The UPDATE also assigns the token column `token`. */
WriteFacts second(WriteFacts f, int64 token)
{
	f.second_token = token;
	return f;
}

/* The other half of the write reported it, and lent `presented`. */
WriteFacts lent(WriteFacts f)
{
	f.lent_reported = true;
	return f;
}

/* AFTER: the row's token `presented`, its key's mark `mark` (0: none). */
WriteFacts new_key(Mode mode, bool enforce, int64 presented, int64 mark, bool kept = false)
{
	WriteFacts f = write(Operation::new_key, mode, enforce, none, presented, mark);
	f.has_mark = mark != 0;
	f.kept_insert = kept;
	return f;
}

struct Case {
	const char *name;
	WriteFacts facts;
	Verdict verdict;
	Rule rule;
	int64 token;
	bool counted;
	bool note_insert;
};
FENCING_PLAIN_DATA(Case);

constexpr Operation ins = Operation::insert, upd = Operation::update, del = Operation::remove,
                    trunc = Operation::truncate;
constexpr Verdict accept = Verdict::accept, refuse = Verdict::refuse, report = Verdict::report,
                  maintain = Verdict::maintain;
constexpr int64 top = PG_INT64_MAX;

const Case cases[] = {
    /* UPDATE, enforcing */
    {"update newer", write(upd, mono, enforcing, none, 5, 4), accept, Rule::none, 5, true, false},
    {"update equal, monotonic", write(upd, mono, enforcing, none, 5, 5), accept, Rule::none, 5,
     true, false},
    {"update equal, strict", write(upd, strict, enforcing, none, 5, 5), refuse, Rule::stale, 5,
     true, false},
    {"update older", write(upd, mono, enforcing, none, 4, 5), refuse, Rule::stale, 5, true, false},
    {"update newer, strict", write(upd, strict, enforcing, none, 6, 5), accept, Rule::none, 6, true,
     false},
    {"update without token", write(upd, mono, enforcing, none, 0, 5), refuse, Rule::missing, 5,
     true, false},
    {"update 2^63-1 over itself, strict", write(upd, strict, enforcing, none, top, top), refuse,
     Rule::stale, top, true, false},
    {"update 2^63-1 over itself, monotonic", write(upd, mono, enforcing, none, top, top), accept,
     Rule::none, top, true, false},
    /* UPDATE, max_token */
    {"update above max_token", write(upd, mono, enforcing, 4, 5, 1), refuse, Rule::above_max, 5,
     true, false},
    {"update at max_token", write(upd, mono, enforcing, 5, 5, 1), accept, Rule::none, 5, true,
     false},
    {"update above max_token, report-only", write(upd, mono, report_only, 4, 5, 1), refuse,
     Rule::above_max, 5, true, false},
    {"update stale and above max_token", write(upd, mono, enforcing, 4, 5, 9), refuse,
     Rule::above_max, 5, true, false},
    /* UPDATE, report-only and maintenance */
    {"update stale, report-only", write(upd, mono, report_only, none, 4, 5), report, Rule::stale, 5,
     true, false},
    {"update equal, strict, report-only", write(upd, strict, report_only, none, 5, 5), report,
     Rule::stale, 5, true, false},
    {"update newer, report-only", write(upd, mono, report_only, none, 6, 5), accept, Rule::none, 6,
     true, false},
    {"update without token, report-only", write(upd, mono, report_only, none, 0, 5), report,
     Rule::missing, 5, true, false},
    {"update without token, maintenance", maintenance(write(upd, mono, enforcing, none, 0, 5)),
     maintain, Rule::missing, 5, true, false},
    {"update without token, maintenance, report-only",
     maintenance(write(upd, strict, report_only, none, 0, 5)), maintain, Rule::missing, 5, true,
     false},
    {"update with token, maintenance: checked",
     maintenance(write(upd, mono, enforcing, none, 4, 5)), refuse, Rule::stale, 5, true, false},
    {"update above max_token, maintenance", maintenance(write(upd, mono, enforcing, 4, 5, 1)),
     refuse, Rule::above_max, 5, true, false},
    /* UPDATE that assigns the token column a second token (fencing.token is `presented`) */
    {"update with a second token", second(write(upd, mono, enforcing, none, 5, 4), 7), refuse,
     Rule::two_tokens, 5, true, false},
    {"update with a second token, report-only", second(write(upd, strict, report_only, 4, 5, 4), 7),
     refuse, Rule::two_tokens, 5, true, false},
    {"update with a second token, stale", second(write(upd, mono, enforcing, none, 5, 6), 7),
     refuse, Rule::stale, 6, true, false},
    {"update with a second token, stale, report-only",
     second(write(upd, mono, report_only, none, 5, 6), 7), report, Rule::stale, 6, true, false},
    {"update with a second token, above max_token", second(write(upd, mono, enforcing, 4, 5, 4), 7),
     refuse, Rule::two_tokens, 5, true, false},
    /* UPDATE of an upsert whose INSERT reported it */
    {"upsert's update, lent reported", lent(write(upd, mono, enforcing, none, 4, 5)), report,
     Rule::lent, 5, true, false},
    {"upsert's update, lent reported, above max_token",
     lent(write(upd, mono, report_only, 4, 9, 5)), report, Rule::lent, 5, true, false},
    /* DELETE */
    {"delete newer", write(del, mono, enforcing, none, 5, 4), accept, Rule::none, 5, true, false},
    {"delete older", write(del, mono, enforcing, none, 3, 4), refuse, Rule::stale, 4, true, false},
    {"delete equal, strict", write(del, strict, enforcing, none, 4, 4), refuse, Rule::stale, 4,
     true, false},
    {"delete without token", write(del, strict, enforcing, none, 0, 4), refuse, Rule::missing, 4,
     true, false},
    {"delete without token, report-only", write(del, mono, report_only, none, 0, 4), report,
     Rule::missing, 4, true, false},
    {"delete without token, maintenance", maintenance(write(del, mono, enforcing, none, 0, 4)),
     maintain, Rule::missing, 4, true, false},
    {"delete above max_token", write(del, mono, enforcing, 3, 5, 4), refuse, Rule::above_max, 5,
     true, false},
    {"delete stale, report-only", write(del, mono, report_only, none, 3, 4), report, Rule::stale, 4,
     true, false},
    {"moved row's delete, its update kept the stored token",
     lent(write(del, strict, report_only, none, 4, 4)), report, Rule::lent, 4, false, false},
    {"moved row's delete, lent reported, another token",
     lent(write(del, mono, report_only, none, 6, 4)), accept, Rule::none, 6, true, false},
    {"moved row's delete, lent reported, stale token",
     lent(write(del, mono, report_only, none, 3, 4)), report, Rule::stale, 4, true, false},
    /* INSERT: an enforcing guard leaves the mark to the AFTER trigger */
    {"insert, enforcing", write(ins, mono, enforcing, none, 5, 0), accept, Rule::none, 5, true,
     false},
    {"insert below its mark, enforcing", write(ins, strict, enforcing, none, 5, 9), accept,
     Rule::none, 5, true, false},
    {"insert without token", write(ins, mono, enforcing, none, 0, 0), refuse, Rule::missing, 0,
     true, false},
    {"insert above max_token", write(ins, mono, enforcing, 4, 5, 0), refuse, Rule::above_max, 5,
     true, false},
    {"insert above max_token, report-only", write(ins, mono, report_only, 4, 5, 0), refuse,
     Rule::above_max, 5, true, false},
    /* INSERT that keeps its key's mark */
    {"insert without token, maintenance", maintenance(write(ins, mono, enforcing, none, 0, 7)),
     maintain, Rule::missing, 7, true, false},
    {"insert without token, maintenance, strict",
     maintenance(write(ins, strict, enforcing, none, 0, 7)), maintain, Rule::missing, 7, true,
     true},
    {"insert without token, maintenance, strict, no mark",
     maintenance(write(ins, strict, enforcing, none, 0, 0)), maintain, Rule::missing, 0, true,
     false},
    {"insert without token, report-only, strict", write(ins, strict, report_only, none, 0, 7),
     report, Rule::missing, 7, true, true},
    {"insert without token, report-only", write(ins, mono, report_only, none, 0, 7), report,
     Rule::missing, 7, true, false},
    {"insert over its mark, report-only", write(ins, mono, report_only, none, 8, 7), accept,
     Rule::none, 8, true, false},
    {"insert at its mark, report-only", write(ins, mono, report_only, none, 7, 7), accept,
     Rule::none, 7, true, false},
    {"insert at its mark, strict, report-only", write(ins, strict, report_only, none, 7, 7), report,
     Rule::stale, 7, true, true},
    {"insert below its mark, report-only", write(ins, mono, report_only, none, 6, 7), report,
     Rule::stale, 7, true, false},
    /* TRUNCATE */
    {"truncate newer", write(trunc, mono, enforcing, none, 5, 4), accept, Rule::none, 5, true,
     false},
    {"truncate older", write(trunc, mono, enforcing, none, 4, 5), refuse, Rule::stale, 5, true,
     false},
    {"truncate equal, strict, report-only", write(trunc, strict, report_only, none, 5, 5), report,
     Rule::stale, 5, true, false},
    {"truncate without token", write(trunc, mono, enforcing, none, 0, 5), refuse, Rule::missing, 5,
     true, false},
    {"truncate without token, maintenance",
     maintenance(write(trunc, mono, report_only, none, 0, 5)), maintain, Rule::missing, 5, true,
     false},
    {"truncate without token, report-only", write(trunc, mono, report_only, none, 0, 5), report,
     Rule::missing, 5, true, false},
    {"truncate above max_token", write(trunc, mono, enforcing, 4, 5, 0), refuse, Rule::above_max, 5,
     true, false},
    /* AFTER INSERT or key change: the key's mark */
    {"new key without a mark", new_key(strict, enforcing, 5, 0), accept, Rule::none, 5, false,
     false},
    {"new key over its mark", new_key(mono, enforcing, 5, 4), accept, Rule::none, 5, false, false},
    {"new key at its mark, monotonic", new_key(mono, enforcing, 5, 5), accept, Rule::none, 5, false,
     false},
    {"new key at its mark, strict", new_key(strict, enforcing, 5, 5), refuse, Rule::stale, 5, false,
     false},
    {"new key below its mark", new_key(mono, enforcing, 5, 6), refuse, Rule::stale, 5, false,
     false},
    {"new key below a moved mark, report-only", new_key(mono, report_only, 5, 6), refuse,
     Rule::mark_moved, 5, false, false},
    {"new key kept its mark, strict, report-only", new_key(strict, report_only, 5, 5, true), accept,
     Rule::none, 5, false, false},
    {"new key kept its mark, strict, maintenance",
     maintenance(new_key(strict, enforcing, 5, 5, true)), accept, Rule::none, 5, false, false},
};

/* insert_follows_mark(): an INSERT reads its key's mark only where it may keep it. */
struct FollowsCase {
	WriteFacts facts;
	bool follows;
};
FENCING_PLAIN_DATA(FollowsCase);

const FollowsCase follows_cases[] = {
    {write(ins, mono, enforcing, none, 5, 0), false},
    {write(ins, mono, enforcing, none, 0, 0), false},
    {maintenance(write(ins, mono, enforcing, none, 0, 0)), true},
    {maintenance(write(ins, mono, enforcing, none, 5, 0)), false},
    {write(ins, strict, report_only, none, 5, 0), true},
    {write(ins, strict, report_only, none, 0, 0), true},
};

const char *shown(const Decision &d)
{
	return psprintf("%s/%s token " INT64_FORMAT "%s%s", verdict_name(d.verdict), rule_name(d.rule),
	                d.token, d.counted ? " counted" : "", d.note_insert ? " note" : "");
}

} // namespace

/* decision_table(): the number of cases checked; the first that fails raises. */
FENCING_FUNCTION(decision_table)
{
	int checked = 0;
	for (const Case &c : cases) {
		Decision got = decide(c.facts);
		Decision want{c.verdict, c.rule, c.token, c.counted, c.note_insert};
		if (got.verdict != want.verdict || got.rule != want.rule || got.token != want.token ||
		    got.counted != want.counted || got.note_insert != want.note_insert)
			ereport(ERROR, (errmsg("decision case \"%s\": got %s, want %s", c.name, shown(got),
			                       shown(want))));
		checked++;
	}
	for (const FollowsCase &c : follows_cases) {
		if (insert_follows_mark(c.facts) != c.follows)
			ereport(ERROR, (errmsg("insert_follows_mark case %d: got %s", checked,
			                       c.follows ? "false" : "true")));
		checked++;
	}
	PG_RETURN_INT32(checked);
}
