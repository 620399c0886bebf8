/*
 * fenced_update()'s own UPDATE, which the guard must recognise.
 *
 * fenced_update(target, key, token) writes `token` into the token column of
 * one row.  When the transaction has set fencing.token to another value, a
 * plain UPDATE that assigns a token column would be "two tokens in one
 * write" (or, assigning the row's stored token, an ORM's write-back that
 * fencing.token overrides); fenced_update()'s explicit token is neither: it
 * is the write's token, as documented.  So that no plain statement can pass
 * for it, fenced_update() registers its write here, in backend memory that
 * SQL cannot reach, only while its own UPDATE runs, and the guard takes the
 * registration for one row: the first BEFORE UPDATE on the target (or one of
 * its partitions), with the registered key, assigning the registered token.
 * Nested calls stack.
 *
 * reset_token() registers its UPDATE the same way, marked `resets`: for that
 * one row the guard takes the token as it is, lower than the stored one or
 * not (the check ran in reset_token(), which only the table's owner may call).
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

struct FencedWrite {
	Oid relid;          /* the table fenced_update() names (a partitioned table: its root) */
	const Datum *key;   /* the row's key, in primary key index order */
	int64 token;        /* the token argument */
	bool taken;         /* the guard has recognised the row */
	bool resets;        /* reset_token(): the token replaces the stored one, unchecked */
	FencedWrite *outer; /* a fenced_update() this one runs inside, or nullptr */
};
FENCING_PLAIN_DATA(FencedWrite);

/* The innermost fenced_update() whose UPDATE is running in this backend, or nullptr. */
inline FencedWrite *running_fenced_write = nullptr;

} // namespace fencing
