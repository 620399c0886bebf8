/*
 * The registry (table fencing.registry): the extension's own record of the
 * tables fencing.protect() guards, with their settings and the identity of
 * the primary key their deleted-key marks were made under.  Written only by
 * protect(), unprotect() and the DDL the extension follows, as the extension
 * owner; never inferred from trigger names.
 */
#pragma once

#include "base/token_compare.hpp"

extern "C" {
#include "utils/rel.h"
}

namespace fencing
{

struct Registration {
	Oid relid; /* the registered relation */
	NameData token_column;
	Mode mode;
	bool is_protected; /* false: unprotected, its key identity still recorded */
};
FENCING_PLAIN_DATA(Registration);

/* The registration of exactly `relid`; false if none.  Cached per backend. */
bool registration_of(Oid relid, Registration *registration);

/*
 * The protected table whose guard covers `rel`: itself if it is registered
 * as protected, else its nearest partition ancestor that is; false if none.
 * (protect() refuses a table with a protected partition, and ATTACH one
 * whose guard would clash, so a tree has one protected table at most.)
 */
bool protection_of(Relation rel, Registration *registration);

/* The same for relation `relid`, read from the catalogs without a lock on it. */
bool protection_of(Oid relid, Registration *registration);

/* Is `rel` or one of its partition ancestors registered, protected or not? */
bool registered(Relation rel);

/*
 * The identity of a relation's primary key as SQL arrays: column names in
 * key order, their types, their collations (schema-qualified names, '' for
 * none) and their type modifiers; false (and nulls) if it has
 * no primary key.
 */
bool key_identity(Relation rel, Datum identity[4]);

/*
 * Is the key identity recorded for `rel` the one its primary key has now?
 * For a relation never registered: only if no mark was made for its tree
 * (under which identity they were made is unknown).
 */
bool identity_unchanged(Relation rel);

/*
 * Records `rel` as protected (or not) with these settings and its current
 * key identity.  Unless `marks_current` (its marks were made under the key
 * it has now), if identity_unchanged() says otherwise, the table's floor for
 * new keys first rises to the highest mark of its tree: the new identity
 * cannot find those marks.  Returns whether a floor rose.
 */
bool record_registration(Relation rel, const char *token_column, Mode mode, bool is_protected,
                         bool marks_current = false);

/* Records that `relid` is no longer protected (its key identity stays); false if it was not. */
bool record_unprotected(Oid relid);

} // namespace fencing
