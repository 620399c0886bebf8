-- The extension's objects, as a text listing to compare a fresh install with
-- an upgraded one: functions (signature, body digest, digest of the whole
-- definition with argument names, defaults, volatility ..., settings, rights,
-- comment), relations (columns, rights, comment), event triggers, and the
-- tables pg_dump dumps with the extension.
SELECT 'function ' || p.oid::regprocedure || ' returns ' || pg_get_function_result(p.oid)
       || ' lang ' || l.lanname || ' definer ' || p.prosecdef
       || ' config ' || coalesce(array_to_string(p.proconfig, ','), '')
       || ' body ' || md5(coalesce(p.prosrc, '') || coalesce(p.probin, ''))
       || ' definition ' || md5(pg_get_functiondef(p.oid))
       || ' acl ' || coalesce(p.proacl::text, '') || ' comment ' || coalesce(obj_description(p.oid, 'pg_proc'), '')
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = 'fencing'::regnamespace
UNION ALL
SELECT 'relation ' || c.oid::regclass || ' kind ' || c.relkind::text || ' acl ' || coalesce(c.relacl::text, '')
       || ' comment ' || coalesce(obj_description(c.oid, 'pg_class'), '')
       || ' columns ' || coalesce((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                                     || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END,
                                                     ', ' ORDER BY a.attnum)
                                   FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0
                                     AND NOT a.attisdropped), '')
FROM pg_class c WHERE c.relnamespace IN ('fencing'::regnamespace, 'fencing_monitor'::regnamespace)
  AND c.relkind IN ('r', 'v', 'S', 'i')
UNION ALL
SELECT 'view ' || c.oid::regclass || ' ' || md5(pg_get_viewdef(c.oid))
FROM pg_class c WHERE c.relnamespace IN ('fencing'::regnamespace, 'fencing_monitor'::regnamespace)
  AND c.relkind = 'v'
UNION ALL
SELECT 'schema ' || n.nspname || ' acl ' || coalesce(n.nspacl::text, '')
FROM pg_namespace n WHERE n.nspname = 'fencing_monitor'
UNION ALL
SELECT 'event trigger ' || e.evtname || ' on ' || e.evtevent || ' tags ' || coalesce(e.evttags::text, '')
       || ' function ' || e.evtfoid::regproc
FROM pg_event_trigger e
UNION ALL
SELECT 'dumped ' || c::regclass
FROM pg_extension x, unnest(x.extconfig) c WHERE x.extname = 'fencing'
ORDER BY 1;
