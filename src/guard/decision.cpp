/*
 * The decision of a guarded write: see decision.hpp.
 */
#include "guard/decision.hpp"

namespace fencing
{

namespace
{

Decision made(Verdict verdict, Rule rule, int64 token, bool counted = true)
{
	return Decision{verdict, rule, token, counted, false};
}

/* The AFTER trigger of a mode that refuses a token equal to the mark must be told. */
bool keeps_refusable_mark(const WriteFacts &f)
{
	return f.stored > 0 && !token_accepts(f.mode, f.stored, f.stored);
}

/* After the unique check: a new key follows its mark, or the row kept exactly that mark. */
Decision decide_new_key(const WriteFacts &f)
{
	if (!f.has_mark || token_accepts(f.mode, f.stored, f.presented) || f.kept_insert)
		return made(Verdict::accept, Rule::none, f.presented, false);
	/* Report-only writes never lower a token: the retry takes the new mark. */
	return made(Verdict::refuse, f.enforce ? Rule::stale : Rule::mark_moved, f.presented, false);
}

/* A write without a token: maintenance, else refused, or reported. */
Decision decide_missing(const WriteFacts &f)
{
	Verdict verdict = f.maintenance ? Verdict::maintain
	                  : f.enforce   ? Verdict::refuse
	                                : Verdict::report;
	Decision d = made(verdict, Rule::missing, f.stored);
	d.note_insert =
	    f.operation == Operation::insert && verdict != Verdict::refuse && keeps_refusable_mark(f);
	return d;
}

} // namespace

bool insert_follows_mark(const WriteFacts &f)
{
	return !f.enforce || (!f.has_token && f.maintenance);
}

Decision decide(const WriteFacts &f)
{
	if (f.operation == Operation::new_key)
		return decide_new_key(f);
	if (f.operation == Operation::update && f.lent_reported)
		return made(Verdict::report, Rule::lent, f.stored);
	/* A moved row's DELETE half: its UPDATE half kept the stored token. */
	if (f.operation == Operation::remove && f.lent_reported && f.presented == f.stored)
		return made(Verdict::report, Rule::lent, f.stored, false);
	if (!f.has_token)
		return decide_missing(f);
	/* Stale either way: refused as stale, which is what a stale ORM save must learn. */
	if (f.second_token != 0 && token_accepts(f.mode, f.stored, f.presented))
		return made(Verdict::refuse, Rule::two_tokens, f.presented);
	if (above_max_token(f.max_token, f.presented))
		return made(Verdict::refuse, Rule::above_max, f.presented);
	/* An enforcing guard's INSERT meets its key's mark after the unique check. */
	if (f.operation == Operation::insert && f.enforce)
		return made(Verdict::accept, Rule::none, f.presented);
	if (token_accepts(f.mode, f.stored, f.presented))
		return made(Verdict::accept, Rule::none, f.presented);
	Decision d = made(f.enforce ? Verdict::refuse : Verdict::report, Rule::stale, f.stored);
	d.note_insert = f.operation == Operation::insert && keeps_refusable_mark(f);
	return d;
}

/* In the order of the enums (decision.hpp). */
const char *verdict_name(Verdict verdict)
{
	static const char *const names[] = {"accept", "refuse", "report", "maintain"};
	static_assert(sizeof names / sizeof *names == static_cast<int>(Verdict::maintain) + 1);
	return names[static_cast<int>(verdict)];
}

const char *rule_name(Rule rule)
{
	static const char *const names[] = {"none",       "stale",      "missing", "above_max",
	                                    "mark_moved", "two_tokens", "lent"};
	static_assert(sizeof names / sizeof *names == static_cast<int>(Rule::lent) + 1);
	return names[static_cast<int>(rule)];
}

} // namespace fencing
