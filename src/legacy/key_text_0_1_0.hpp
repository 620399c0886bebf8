/*
 * Serves 0.1.0's objects (until ALTER EXTENSION fencing UPDATE): 0.1.0
 * named a deleted key's marks by the key's text, its columns printed with
 * fixed DateStyle, TimeZone, IntervalStyle, extra_float_digits and
 * bytea_output, numeric scale trimmed and float zeros made one.
 */
#pragma once

#include "catalog/keys.hpp"

namespace fencing
{

/* 0.1.0: sets the styles 0.1.0 printed keys with, at a new GUC nest level (returned). */
int use_0_1_0_styles();

/* 0.1.0: a key's name, its columns' text under those styles, as a text[]. */
Datum key_text_0_1_0(Relation rel, const KeyColumns &key, const Datum *values, const bool *isnull);

/*
 * A key as the installed release's marks name it: key_hash(), and with
 * 0.1.0's objects also its text (KeyHash::text_0_1_0).
 */
KeyHash key_identity(Relation rel, const KeyColumns &key, const Datum *values, const bool *isnull);

/* key_identity() of a row's primary key. */
KeyHash row_key_identity(Relation rel, const KeyColumns &key, HeapTuple row);

} // namespace fencing
