/*
 * Key identities.  Each key column contributes an image that depends on its
 * value only: strings their bytes in the database encoding (not in the
 * client's), enums their label, integers their value as a big-endian int8
 * (so int -> bigint keeps the identity), numeric and floats a normalized
 * value (1.0 = 1.00, -0 = 0, one NaN), every other type its binary send
 * form (network byte order, the same on every machine; a regclass is its
 * OID, not its search_path-dependent name).
 */
#include "catalog/keys.hpp"

#include <utility>

extern "C" {
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace fencing
{

namespace
{

/* How a key column's value becomes bytes. */
enum class Image { integer, float4, float8, numeric, string, bpchar, name, enumeration, sent };

Image image_of(Oid base_type)
{
	switch (base_type) {
	case INT2OID:
	case INT4OID:
	case INT8OID:
		return Image::integer;
	case FLOAT4OID:
		return Image::float4;
	case FLOAT8OID:
		return Image::float8;
	case NUMERICOID:
		return Image::numeric;
	case TEXTOID:
	case VARCHAROID:
		return Image::string;
	case BPCHAROID:
		return Image::bpchar;
	case NAMEOID:
		return Image::name;
	default:
		return type_is_enum(base_type) ? Image::enumeration : Image::sent;
	}
}

/*
 * Types whose equal values have several bit patterns, which image_of()
 * normalizes: numeric scale, float zeros and NaNs, char(n) padding (with a
 * deterministic collation, char(n) values are equal iff equal once trimmed).
 */
bool normalized(Image image, Oid collation)
{
	if (image == Image::bpchar)
		return OidIsValid(collation) && get_collation_isdeterministic(collation);
	return image == Image::float4 || image == Image::float8 || image == Image::numeric;
}

/* Feeds one length-prefixed field to the hash. */
void feed(pg_cryptohash_ctx *hash, const void *data, uint32 length)
{
	uint32 prefix = pg_hton32(length);
	if (pg_cryptohash_update(hash, reinterpret_cast<const uint8 *>(&prefix), sizeof prefix) < 0 ||
	    (length > 0 && length != UINT32_MAX &&
	     pg_cryptohash_update(hash, static_cast<const uint8 *>(data), length) < 0))
		elog(ERROR, "fencing: could not hash a key: %s", pg_cryptohash_error(hash));
}

/* A varlena's payload, detoasted. */
void feed_varlena(pg_cryptohash_ctx *hash, Datum value)
{
	struct varlena *v = PG_DETOAST_DATUM_PACKED(value);
	feed(hash, VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
}

/* A float as its big-endian IEEE bits, with one zero and one NaN. */
template <typename Float> void feed_float(pg_cryptohash_ctx *hash, Float f, Float nan)
{
	f = isnan(f) ? nan : f == 0 ? 0 : f;
	uint8 bytes[sizeof f];
	memcpy(bytes, &f, sizeof f);
#ifndef WORDS_BIGENDIAN
	for (size_t i = 0; i < sizeof f / 2; i++)
		std::swap(bytes[i], bytes[sizeof f - 1 - i]);
#endif
	feed(hash, bytes, sizeof bytes);
}

void feed_value(pg_cryptohash_ctx *hash, Oid base_type, Datum value)
{
	switch (image_of(base_type)) {
	case Image::integer: {
		int64 n = base_type == INT2OID   ? DatumGetInt16(value)
		          : base_type == INT4OID ? DatumGetInt32(value)
		                                 : DatumGetInt64(value);
		uint64 big = pg_hton64(static_cast<uint64>(n));
		feed(hash, &big, sizeof big);
		break;
	}
	case Image::float4:
		feed_float(hash, DatumGetFloat4(value), get_float4_nan());
		break;
	case Image::float8:
		feed_float(hash, DatumGetFloat8(value), get_float8_nan());
		break;
	case Image::numeric:
		feed_varlena(hash, DirectFunctionCall1(numeric_send,
		                                       DirectFunctionCall1(numeric_trim_scale, value)));
		break;
	case Image::string:
		feed_varlena(hash, value);
		break;
	case Image::bpchar: {
		/* Trailing spaces of char(n) are padding: 'a' = 'a  '. */
		struct varlena *v = PG_DETOAST_DATUM_PACKED(value);
		const char *s = VARDATA_ANY(v);
		uint32 n = VARSIZE_ANY_EXHDR(v);
		while (n > 0 && s[n - 1] == ' ')
			n--;
		feed(hash, s, n);
		break;
	}
	case Image::name: {
		const char *s = NameStr(*DatumGetName(value));
		feed(hash, s, strnlen(s, NAMEDATALEN));
		break;
	}
	case Image::enumeration: {
		HeapTuple tuple = SearchSysCache1(ENUMOID, value);
		if (!HeapTupleIsValid(tuple))
			elog(ERROR, "fencing: cache lookup failed for enum value %u", DatumGetObjectId(value));
		const char *label = NameStr(((Form_pg_enum)GETSTRUCT(tuple))->enumlabel);
		feed(hash, label, strnlen(label, NAMEDATALEN));
		ReleaseSysCache(tuple);
		break;
	}
	case Image::sent: {
		Oid send;
		bool varlena;
		getTypeBinaryOutputInfo(base_type, &send, &varlena);
		feed_varlena(hash, PointerGetDatum(OidSendFunctionCall(send, value)));
		break;
	}
	}
}

} // namespace

KeyHash key_hash(Relation rel, const KeyColumns &key, const Datum *values, const bool *isnull)
{
	static const char version[] = "fencing key 1";
	pg_cryptohash_ctx *hash = pg_cryptohash_create(PG_SHA256);
	if (hash == nullptr || pg_cryptohash_init(hash) < 0)
		elog(ERROR, "fencing: could not start a key hash");
	feed(hash, version, sizeof version - 1);
	TupleDesc desc = RelationGetDescr(rel);
	for (int i = 0; i < key.count; i++) {
		if (isnull[i]) {
			feed(hash, nullptr, UINT32_MAX);
			continue;
		}
		Oid type = TupleDescAttr(desc, key.attnums[i] - 1)->atttypid;
		feed_value(hash, getBaseType(type), values[i]);
	}
	KeyHash result;
	if (pg_cryptohash_final(hash, result.bytes, sizeof result.bytes) < 0)
		elog(ERROR, "fencing: could not finish a key hash: %s", pg_cryptohash_error(hash));
	pg_cryptohash_free(hash);
	result.text_0_1_0 = static_cast<Datum>(0);
	return result;
}

Datum key_hash_datum(const KeyHash &key)
{
	bytea *result = static_cast<bytea *>(palloc(VARHDRSZ + sizeof key.bytes));
	SET_VARSIZE(result, VARHDRSZ + sizeof key.bytes);
	memcpy(VARDATA(result), key.bytes, sizeof key.bytes);
	return PointerGetDatum(result);
}

KeyHash row_key_hash(Relation rel, const KeyColumns &key, HeapTuple row)
{
	Datum values[INDEX_MAX_KEYS];
	bool isnull[INDEX_MAX_KEYS];
	key_values(rel, key, row, values, isnull);
	return key_hash(rel, key, values, isnull);
}

void require_identifiable_key(Relation rel, Relation pk)
{
	KeyColumns key = key_columns(pk);
	for (int i = 0; i < key.count; i++) {
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), key.attnums[i] - 1);
		Oid base = getBaseType(att->atttypid);
		Image image = image_of(base);
		bool one_image = normalized(image, pk->rd_indcollation[i]);
		if (!one_image) {
			Oid type = pk->rd_opcintype[i];
			Oid proc = get_opfamily_proc(pk->rd_opfamily[i], type, type, BTEQUALIMAGE_PROC);
			one_image =
			    OidIsValid(proc) && DatumGetBool(OidFunctionCall1Coll(proc, pk->rd_indcollation[i],
			                                                          ObjectIdGetDatum(type)));
		}
		Oid send = InvalidOid;
		if (image == Image::sent) {
			HeapTuple tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(base));
			if (HeapTupleIsValid(tuple)) {
				send = ((Form_pg_type)GETSTRUCT(tuple))->typsend;
				ReleaseSysCache(tuple);
			}
		}
		if (!one_image || (image == Image::sent && !OidIsValid(send)))
			ereport(ERROR,
			        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			         errmsg("primary key column \"%s\" of relation \"%s\" has type %s, which the "
			                "guard cannot mark reliably",
			                NameStr(att->attname), RelationGetRelationName(rel),
			                format_type_with_typemod(att->atttypid, att->atttypmod)),
			         !one_image
			             ? errdetail("Equal values of this type (or collation) can have different "
			                         "binary forms, so a stale holder could re-insert a deleted "
			                         "key written another way.")
			             : errdetail("The type has no binary output function."),
			         errhint("Use a key type whose equal values are identical: integers, numeric, "
			                 "text or varchar with a deterministic collation, uuid, date, "
			                 "timestamp, timestamptz, bytea, enums.")));
	}
}

} // namespace fencing
