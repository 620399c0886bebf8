/*
 * JSON objects of column names and values: see json_columns.hpp.
 */
#include "catalog/json_columns.hpp"
#include "catalog/relation.hpp"

extern "C" {
#include "access/sysattr.h"
#include "access/transam.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
}

namespace fencing
{

namespace
{

/* The text of a non-null JSON value: a string's content, a number or boolean literal, JSON text. */
char *plain_text(const JsonbValue &v)
{
	switch (v.type) {
	case jbvString:
		return pnstrdup(v.val.string.val, v.val.string.len);
	case jbvNumeric:
		return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
	case jbvBool:
		return pstrdup(v.val.boolean ? "true" : "false");
	case jbvBinary:
		return JsonbToCString(nullptr, v.val.binary.data, v.val.binary.len);
	default:
		elog(ERROR, "fencing: unexpected jsonb value type %d", static_cast<int>(v.type));
	}
	return nullptr;
}

/* A JSON array as a PostgreSQL array literal: ["a", null, [1]] is {"a",NULL,{"1"}}. */
void append_array_literal(StringInfo out, JsonbContainer *array)
{
	appendStringInfoChar(out, '{');
	JsonbIterator *it = JsonbIteratorInit(array);
	JsonbValue v;
	JsonbIteratorToken token;
	bool first = true;
	while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
		if (token != WJB_ELEM)
			continue;
		if (!first)
			appendStringInfoChar(out, ',');
		first = false;
		if (v.type == jbvNull)
			appendStringInfoString(out, "NULL");
		else if (v.type == jbvBinary && JsonContainerIsArray(v.val.binary.data))
			append_array_literal(out, v.val.binary.data);
		else {
			appendStringInfoChar(out, '"');
			for (const char *c = plain_text(v); *c; c++) {
				if (*c == '"' || *c == '\\')
					appendStringInfoChar(out, '\\');
				appendStringInfoChar(out, *c);
			}
			appendStringInfoChar(out, '"');
		}
	}
	appendStringInfoChar(out, '}');
}

} // namespace

Oid column_type(Relation rel, AttrNumber attnum)
{
	return TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;
}

/*
 * The text a JSON value stands for in the input function of a column of type
 * `type`; nullptr for JSON null.  A json or jsonb column takes the JSON value
 * itself; an array column takes a JSON array element by element (or a
 * PostgreSQL array literal in a string); other types the plain text.
 */
char *json_text(const JsonbValue &v, Oid type)
{
	if (v.type == jbvNull)
		return nullptr;
	/* The types of the initial catalog (pg_type.dat) are no domains: no lookup for them. */
	Oid base = type < FirstGenbkiObjectId ? type : getBaseType(type);
	if (base == JSONOID || base == JSONBOID) {
		if (v.type == jbvBinary)
			return JsonbToCString(nullptr, v.val.binary.data, v.val.binary.len);
		Jsonb *scalar = JsonbValueToJsonb(const_cast<JsonbValue *>(&v));
		return JsonbToCString(nullptr, &scalar->root, VARSIZE(scalar));
	}
	if (v.type == jbvBinary && JsonContainerIsArray(v.val.binary.data) &&
	    OidIsValid(get_element_type(base))) {
		StringInfoData out;
		initStringInfo(&out);
		append_array_literal(&out, v.val.binary.data);
		return out.data;
	}
	return plain_text(v);
}

/*
 * Converts `text` (nullptr: NULL) with the column's input function, as a
 * plain UPDATE's literal would be; a bad value names the column.
 */
Datum column_value(Relation rel, AttrNumber attnum, const char *text)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	Oid input, ioparam;
	getTypeInputInfo(att->atttypid, &input, &ioparam);
	/*
	 * A FmgrInfo of this call's own: an input function keeps state in
	 * fn_extra (a domain its CHECK's), and a fenced_update() nested in that
	 * CHECK must not reset what this one is still using.
	 */
	auto *info = static_cast<FmgrInfo *>(palloc(sizeof(FmgrInfo)));
	fmgr_info(input, info);
	MemoryContext context = CurrentMemoryContext;
	volatile Datum value = 0;
	PG_TRY();
	{
		value = InputFunctionCall(info, const_cast<char *>(text), ioparam, att->atttypmod);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		ErrorData *error = CopyErrorData();
		FlushErrorState();
		ereport(ERROR, (errcode(error->sqlerrcode),
		                errmsg("invalid value for column \"%s\" of relation \"%s\": %s",
		                       NameStr(att->attname), RelationGetRelationName(rel), error->message),
		                error->detail ? errdetail("%s", error->detail) : 0));
	}
	PG_END_TRY();
	return value;
}

/* The members of a jsonb argument that must be an object. */
int object_members(Jsonb *json, const char *argument, char ***names, JsonbValue **values)
{
	if (!JB_ROOT_IS_OBJECT(json) || JB_ROOT_IS_SCALAR(json))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("%s must be a JSON object of column names and values", argument)));
	int size = JB_ROOT_COUNT(json);
	*names = static_cast<char **>(palloc(sizeof(char *) * (size + 1)));
	*values = static_cast<JsonbValue *>(palloc(sizeof(JsonbValue) * (size + 1)));
	JsonbIterator *it = JsonbIteratorInit(&json->root);
	JsonbValue v;
	JsonbIteratorToken token;
	int n = 0;
	while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
		if (token == WJB_KEY)
			(*names)[n] = pnstrdup(v.val.string.val, v.val.string.len);
		else if (token == WJB_VALUE)
			(*values)[n++] = v;
	}
	return n;
}

/* The column a member names, or 42703. */
AttrNumber named_column(Relation rel, const char *name)
{
	AttrNumber attnum = user_column(rel, name);
	if (attnum == InvalidAttrNumber)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
		                errmsg("column \"%s\" of relation \"%s\" does not exist", name,
		                       RelationGetRelationName(rel))));
	return attnum;
}

int key_position(Bitmapset *key_attrs, AttrNumber attnum)
{
	return bms_member_index(key_attrs, attnum - FirstLowInvalidHeapAttributeNumber);
}

void alloc_columns(Columns *c, int count)
{
	c->count = count;
	c->attnums = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * (count + 1)));
	c->values = static_cast<Datum *>(palloc0(sizeof(Datum) * (count + 1)));
	c->nulls = static_cast<char *>(palloc0(count + 1));
}

Columns parse_key(Relation rel, Bitmapset *key_attrs, Jsonb *json)
{
	char **names;
	JsonbValue *values;
	int n = object_members(json, "key", &names, &values);
	int nkeys = bms_num_members(key_attrs);
	Columns key;
	alloc_columns(&key, nkeys);
	for (int i = 0; i < n; i++) {
		AttrNumber attnum = named_column(rel, names[i]);
		int pos = key_position(key_attrs, attnum);
		if (pos < 0)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("key names column \"%s\", which is not in the primary key of "
			                       "relation \"%s\"",
			                       names[i], RelationGetRelationName(rel))));
		char *text = json_text(values[i], column_type(rel, attnum));
		if (text == nullptr)
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			                errmsg("key column \"%s\" must not be null", names[i])));
		key.attnums[pos] = attnum;
		key.values[pos] = column_value(rel, attnum, text);
		key.nulls[pos] = ' ';
	}
	int member = -1;
	for (int i = 0; i < nkeys; i++) {
		member = bms_next_member(key_attrs, member);
		if (key.attnums[i] == InvalidAttrNumber)
			ereport(ERROR,
			        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			         errmsg("key must name every primary key column of relation \"%s\"",
			                RelationGetRelationName(rel)),
			         errdetail("Primary key column \"%s\" is missing.",
			                   get_attname(RelationGetRelid(rel),
			                               member + FirstLowInvalidHeapAttributeNumber, false))));
	}
	return key;
}

Datum *key_in_index_order(const Columns &key, Bitmapset *key_attrs, Relation pk)
{
	if (key.count == 1)
		return key.values; /* one column: no order to look up in the index */
	KeyColumns columns = key_columns(pk);
	Datum *values = static_cast<Datum *>(palloc(sizeof(Datum) * columns.count));
	for (int i = 0; i < columns.count; i++)
		values[i] = key.values[key_position(key_attrs, columns.attnums[i])];
	return values;
}

const char *column_name(Relation rel, AttrNumber attnum)
{
	return quote_identifier(NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname));
}

void append_key_match(StringInfo sql, Relation rel, Relation pk, const Columns &key,
                      int first_param)
{
	KeyColumns columns = key_columns(pk);
	for (int i = 0; i < key.count; i++) {
		int column = 0; /* this key column's position in the index */
		while (columns.attnums[column] != key.attnums[i])
			column++;
		appendStringInfo(sql, "%s%s %s $%d", i > 0 ? " AND " : "", column_name(rel, key.attnums[i]),
		                 key_equality_operator(pk, column), first_param + i);
	}
}

} // namespace fencing
