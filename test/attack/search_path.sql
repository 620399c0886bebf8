-- search_path: the attacker's shadows of pg_catalog names, in its own schema,
-- which its role setting puts before pg_catalog (search_path = attacker,
-- pg_catalog).  Each calls the canary and then does what the original does.
\set ON_ERROR_STOP 1

CREATE FUNCTION attacker.sp_fire(what text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.canary('search_path:' || what); END $$;

-- Functions.
CREATE FUNCTION attacker.format(f text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('format'); RETURN pg_catalog.format(f); END $$;
CREATE FUNCTION attacker.format(f text, a text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('format'); RETURN pg_catalog.format(f, a); END $$;
CREATE FUNCTION attacker.format(f text, a text, b text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('format'); RETURN pg_catalog.format(f, a, b); END $$;
CREATE FUNCTION attacker.starts_with(a text, b text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('starts_with'); RETURN pg_catalog.starts_with(a, b); END $$;
CREATE FUNCTION attacker.quote_ident(a text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('quote_ident'); RETURN pg_catalog.quote_ident(a); END $$;
CREATE FUNCTION attacker.length(a text) RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('length_text'); RETURN pg_catalog.length(a); END $$;
CREATE FUNCTION attacker.length(a bytea) RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('length_bytea'); RETURN pg_catalog.length(a); END $$;
CREATE FUNCTION attacker.current_setting(a text, b boolean) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('current_setting'); RETURN pg_catalog.current_setting(a, b); END $$;
CREATE FUNCTION attacker.set_config(a text, b text, c boolean) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('set_config'); RETURN pg_catalog.set_config(a, b, c); END $$;
CREATE FUNCTION attacker.to_regclass(a text) RETURNS regclass LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('to_regclass'); RETURN pg_catalog.to_regclass(a); END $$;
CREATE FUNCTION attacker.to_regnamespace(a text) RETURNS regnamespace LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('to_regnamespace'); RETURN pg_catalog.to_regnamespace(a); END $$;
CREATE FUNCTION attacker.pg_get_triggerdef(a oid) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('pg_get_triggerdef'); RETURN pg_catalog.pg_get_triggerdef(a); END $$;
CREATE FUNCTION attacker.now() RETURNS timestamptz LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('now'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION attacker.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('clock_timestamp'); RETURN pg_catalog.clock_timestamp(); END $$;
CREATE FUNCTION attacker.unnest(a regclass[]) RETURNS SETOF regclass LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('unnest'); RETURN QUERY SELECT pg_catalog.unnest(a); END $$;
CREATE FUNCTION attacker.token_accepts(a bigint, b bigint, c boolean) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('token_accepts'); RETURN fencing.token_accepts(a, b, c); END $$;
CREATE FUNCTION attacker.sha256(a bytea) RETURNS bytea LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('sha256'); RETURN pg_catalog.sha256(a); END $$;
CREATE FUNCTION attacker.convert_from(a bytea, b name) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('convert_from'); RETURN pg_catalog.convert_from(a, b); END $$;
CREATE FUNCTION attacker.date_part(a text, b timestamptz) RETURNS double precision LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('date_part'); RETURN pg_catalog.date_part(a, b); END $$;

-- What campaign() and resign() call (they run with the caller's rights).
CREATE FUNCTION attacker.pg_notify(a text, b text) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('pg_notify'); PERFORM pg_catalog.pg_notify(a, b); END $$;
CREATE FUNCTION attacker.octet_length(a text) RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('octet_length'); RETURN pg_catalog.octet_length(a); END $$;

-- Aggregates: max(bigint), string_agg(text, text), array_agg(bigint).
CREATE FUNCTION attacker.sp_max_step(s bigint, v bigint) RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('max'); RETURN pg_catalog.greatest(s, v); END $$;
CREATE AGGREGATE attacker.max(bigint) (SFUNC = attacker.sp_max_step, STYPE = bigint);
CREATE FUNCTION attacker.sp_agg_step(s text, v text, d text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('string_agg'); RETURN CASE WHEN s IS NULL THEN v ELSE s || d || v END; END $$;
CREATE AGGREGATE attacker.string_agg(text, text) (SFUNC = attacker.sp_agg_step, STYPE = text);

-- Operators on built-in types.
DO $$
DECLARE
	t record;
BEGIN
	FOR t IN SELECT * FROM (VALUES
		('=', 'bigint', 'int8eq'), ('<>', 'bigint', 'int8ne'), ('<', 'bigint', 'int8lt'),
		('>', 'bigint', 'int8gt'), ('<=', 'bigint', 'int8le'), ('>=', 'bigint', 'int8ge'),
		('=', 'integer', 'int4eq'), ('=', 'smallint', 'int2eq'),
		('=', 'text', 'texteq'), ('<>', 'text', 'textne'), ('~', 'text', 'textregexeq'),
		('~~', 'text', 'textlike'),
		('=', 'name', 'nameeq'), ('<>', 'name', 'namene'), ('=', 'oid', 'oideq'), ('<>', 'oid', 'oidne'),
		('=', 'bytea', 'byteaeq'), ('=', 'regclass', 'oideq'), ('=', '"char"', 'chareq'),
		('<>', '"char"', 'charne'), ('=', 'boolean', 'booleq'),
		('<', 'timestamptz', 'timestamptz_lt'), ('>', 'timestamptz', 'timestamptz_gt'),
		('=', 'regprocedure', 'oideq'), ('<>', 'regprocedure', 'oidne'), ('=', 'regnamespace', 'oideq'))
		AS v(op, typ, fn) LOOP
		EXECUTE format($f$CREATE FUNCTION attacker.%I(a %s, b %s) RETURNS boolean
			LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
			AS $b$ BEGIN PERFORM attacker.sp_fire(%L); RETURN pg_catalog.%I(a, b); END $b$ $f$,
			'sp_' || t.fn || '_' || md5(t.typ), t.typ, t.typ, 'operator ' || t.op || ' ' || t.typ, t.fn);
		EXECUTE format('CREATE OPERATOR attacker.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = attacker.%I)',
			t.op, t.typ, t.typ, 'sp_' || t.fn || '_' || md5(t.typ));
	END LOOP;
END
$$;
CREATE FUNCTION attacker.sp_textcat(a text, b text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('operator || text'); RETURN pg_catalog.textcat(a, b); END $$;
CREATE OPERATOR attacker.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = attacker.sp_textcat);
CREATE FUNCTION attacker.sp_int4and(a integer, b integer) RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('operator & integer'); RETURN pg_catalog.int4and(a, b); END $$;
CREATE OPERATOR attacker.& (LEFTARG = integer, RIGHTARG = integer, FUNCTION = attacker.sp_int4and);
CREATE FUNCTION attacker.sp_int8pl(a bigint, b bigint) RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.sp_fire('operator + bigint'); RETURN pg_catalog.int8pl(a, b); END $$;
CREATE OPERATOR attacker.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = attacker.sp_int8pl);
