/*
 * The identity of a primary key value, for deleted-key marks and for telling
 * whether two writes touch the same row: a SHA-256 hash of the key columns'
 * binary images.  No session setting (search_path, DateStyle, TimeZone,
 * lc_*, bytea_output, client_encoding ...) changes an image, so every
 * session names a key alike, and the hash has a bounded size, so every key
 * the table accepts can be marked.
 */
#pragma once

#include "catalog/relation.hpp"

namespace fencing
{

/* A key's identity: the same for all equal values of the key, whatever the session. */
struct KeyHash {
	uint8 bytes[32];
	/*
	 * With 0.1.0's objects (before ALTER EXTENSION UPDATE): the text[] 0.1.0
	 * named the key's marks by (legacy/key_text_0_1_0.hpp, key_identity());
	 * else 0.  Not part of equality.
	 */
	Datum text_0_1_0;
};
FENCING_PLAIN_DATA(KeyHash);

inline bool operator==(const KeyHash &a, const KeyHash &b)
{
	return memcmp(a.bytes, b.bytes, sizeof a.bytes) == 0;
}

/* The hash of primary key values of `rel`, in index column order. */
KeyHash key_hash(Relation rel, const KeyColumns &key, const Datum *values, const bool *isnull);

/* A key hash as a bytea Datum, the form fencing.deleted_keys stores. */
Datum key_hash_datum(const KeyHash &key);

/* The hash of a row's primary key. */
KeyHash row_key_hash(Relation rel, const KeyColumns &key, HeapTuple row);

/*
 * Errors with 0A000 unless every primary key column of `rel` has a type
 * whose equal values always have one image (btree "equalimage", or numeric
 * and floats, which are normalized first) and a binary form.
 */
void require_identifiable_key(Relation rel, Relation pk);

} // namespace fencing
