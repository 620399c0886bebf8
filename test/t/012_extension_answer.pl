# The one answer to "is the extension installed in this database, and at
# which release" (src/catalog/extension.cpp), cached per backend, follows
# what other sessions do while long-lived sessions keep running statements:
#   1. a database without the extension runs every hook path while a session
#      of a database with it keeps enforcing, both open at once;
#   2. the extension created, dropped and created again in a database by
#      another session, twice, and once inside an open transaction;
#   3. ALTER EXTENSION fencing UPDATE from 0.3.0 by another session;
#   4. an update between older releases (no script of theirs calls the
#      library to tell anyone): on a preloaded server (the object access
#      hook of the updating session tells), and on one that does not preload
#      the module, by a session that loads it only inside the script;
#   5. DROP EXTENSION of 0.3.0's objects by a session that never loads the
#      module (0.3.0's event triggers do not load it for DROP EXTENSION):
#      the drop of the extension's sequence is what tells;
#   6. dropped, then created at 0.1.0 by a session that loads the module
#      only inside the script, where no schema is made (schema fencing
#      outlives DROP EXTENSION): _PG_init tells.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# A long-lived psql session that goes on after errors, printing SQLSTATEs.
sub session
{
	my ($node, $db) = @_;
	my $session = $node->background_psql($db, on_error_stop => 0);
	$session->query_safe('\set VERBOSITY sqlstate');
	return $session;
}

# Runs $sql in $session: its output, and what it printed on stderr
# (errors, warnings, notices), each once.
sub run
{
	my ($session, $sql) = @_;
	$session->{stderr} = '';
	my $out = $session->query($sql);
	(my $err = $session->{stderr}) =~ s/\s+$//;
	$session->{stderr} = '';
	return ($out, $err);
}

# Runs $sql in $session and checks it printed nothing on stderr; returns its output.
sub ok_in
{
	my ($session, $sql, $name) = @_;
	my ($out, $err) = run($session, $sql);
	is($err, '', $name);
	return $out;
}

# Runs $sql in $session and checks it failed with $sqlstate.
sub fails_in
{
	my ($session, $sql, $sqlstate, $name) = @_;
	my (undef, $err) = run($session, $sql);
	like($err, qr/ERROR:\s+\Q$sqlstate\E/, $name);
}

# A MERGE whose UPDATE actions assign the token column in one action and
# not in another: refused (0A000) on a protected table only.
sub mixed_merge
{
	my ($table, $id) = @_;
	return "MERGE INTO $table t USING (VALUES ($id, 'merged', 1000)) s(id, v, tok) ON t.id = s.id"
	  . " WHEN MATCHED AND s.tok > 999 THEN UPDATE SET v = s.v, last_fencing_token = s.tok"
	  . " WHEN MATCHED THEN UPDATE SET v = s.v";
}

# A write presenting a token one below the row's (refused by the guard
# trigger, which runs wherever it is installed: the MERGE check is the hook's).
sub lower_token
{
	my ($table, $id) = @_;
	return "UPDATE $table SET v = 'lower', last_fencing_token = last_fencing_token - 1 WHERE id = $id";
}

my $node = FencingNode::new_node('answer');
$node->append_conf('postgresql.conf', "max_prepared_transactions = 10\n");
$node->restart;

# 1. Two databases, two sessions open at once.
$node->safe_psql('postgres', q{
	CREATE TABLE guarded (id int PRIMARY KEY, v text);
	SELECT fencing.protect('guarded');
	INSERT INTO guarded VALUES (1, 'at 10', 10);
	CREATE DATABASE plain;
});
my $with = session($node, 'postgres');
my $plain = session($node, 'plain');

sub still_enforcing
{
	my ($after) = @_;
	fails_in($with, lower_token('guarded', 1), '23T01',
		"the database with the extension refuses a stale write after $after");
	fails_in($with, mixed_merge('guarded', 1), '0A000', "and a MERGE with disagreeing actions");
}

my @paths = (
	[ 'MERGE', q{
		CREATE TABLE merge_t (id int PRIMARY KEY, v text);
		CREATE TABLE merge_s (id int, v text);
		INSERT INTO merge_s VALUES (1, 'a');
		MERGE INTO merge_t t USING merge_s s ON t.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v);
		SELECT count(*) FROM merge_t;
	}, '1' ],
	[ 'a MERGE with disagreeing actions', q{
		CREATE TABLE acct (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
		INSERT INTO acct VALUES (1, 'one', 10);
	} . mixed_merge('acct', 1) . q{;
		SELECT v FROM acct;
	}, 'merged' ],
	[ 'COPY', qq{
		COPY acct FROM STDIN;
2\tcopied\t5
\\.
		COPY (SELECT v FROM acct WHERE id = 2) TO STDOUT;
	}, 'copied' ],
	[ 'TRUNCATE', q{TRUNCATE acct; SELECT count(*) FROM acct;}, '0' ],
	[ 'DDL and partitions', q{
		CREATE TABLE parts (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
		CREATE TABLE parts_1 PARTITION OF parts FOR VALUES FROM (0) TO (10);
		CREATE TABLE parts_2 (id int PRIMARY KEY, v text);
		ALTER TABLE parts ATTACH PARTITION parts_2 FOR VALUES FROM (10) TO (20);
		ALTER TABLE parts ADD COLUMN w int;
		ALTER TABLE parts DETACH PARTITION parts_2;
		DROP TABLE parts_2;
		DROP TABLE parts;
		SELECT count(*) FROM pg_class WHERE relname LIKE 'parts%';
	}, '0' ],
	[ 'prepared transactions', q{
		BEGIN; INSERT INTO acct VALUES (3, 'prepared', 1); PREPARE TRANSACTION 'plain_commit';
		COMMIT PREPARED 'plain_commit';
		BEGIN; DELETE FROM acct; PREPARE TRANSACTION 'plain_rollback';
		ROLLBACK PREPARED 'plain_rollback';
		SELECT v FROM acct;
	}, 'prepared' ],
	[ 'DISCARD ALL', q{DISCARD ALL; SELECT 'discarded';}, 'discarded' ],
	[ 'SET fencing.token (no warning)', q{
		SET fencing.token = 5; SHOW fencing.token;
	}, '5' ],
);
for my $path (@paths)
{
	my ($name, $sql, $expected) = @$path;
	my $out = ok_in($plain, $sql, "$name in a database without the extension: no error, no warning");
	is((split /\n/, $out)[-1], $expected, "$name: as without the module");
	still_enforcing($name);
}
my (undef, $err) = run($plain, q{BEGIN; INSERT INTO acct VALUES (4, 'doomed', 1); SELECT 1 / 0; COMMIT;});
like($err, qr/ERROR:\s+22012/, 'a failing transaction fails as without the module');
unlike($err, qr/ERROR:\s++(?!22012)/, 'with its own error only');
(undef, $err) = run($plain, q{
	BEGIN; SAVEPOINT s; DROP TABLE merge_s; SELECT 1 / 0; ROLLBACK TO SAVEPOINT s;
	MERGE INTO merge_t t USING merge_s s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'kept';
	COMMIT;
});
like($err, qr/ERROR:\s+22012/, 'a failing subtransaction fails as without the module');
unlike($err, qr/ERROR:\s++(?!22012)/, 'and the transaction goes on');
still_enforcing('the failures');
(undef, $err) = run($with, 'SET fencing.token = 5; RESET fencing.token;');
like($err, qr/WARNING:\s+01000/, 'a plain SET of fencing.token warns where the extension is installed');

# 2. Created, dropped and created again by another session while a
# long-lived session keeps running statements: it follows each time.
# A database $db without the extension, its table acct (id 1 at token
# 100), and a session there whose MERGE with disagreeing actions runs.
sub unprotected_database
{
	my ($db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
		CREATE TABLE acct (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0);
		INSERT INTO acct VALUES (1, 'one', 100);
	});
	my $session = session($node, $db);
	ok_in($session, mixed_merge('acct', 1), "$db, no extension yet: the MERGE runs");
	return $session;
}
my $long = unprotected_database('cycle');
ok_in($long, lower_token('acct', 1), 'and a lower token is no token');
for my $round (1 .. 2)
{
	$node->safe_psql('cycle', q{CREATE EXTENSION fencing; SELECT fencing.protect('acct');});
	fails_in($long, lower_token('acct', 1), '23T01',
		"round $round: created by another session, the long-lived one refuses a stale write");
	fails_in($long, mixed_merge('acct', 1), '0A000', "round $round: and the MERGE");
	ok_in($long, q{BEGIN; SET LOCAL fencing.token = 2000; UPDATE acct SET v = 'fenced'; COMMIT;},
		"round $round: a current token is accepted");
	$node->safe_psql('cycle', 'DROP EXTENSION fencing CASCADE');
	ok_in($long, mixed_merge('acct', 1), "round $round: dropped by another session: the MERGE runs");
	ok_in($long, lower_token('acct', 1), "round $round: and a lower token writes");
	ok_in($long, 'SET fencing.token = 5; RESET fencing.token;', "round $round: SET does not warn");
}
# Created while the long-lived session is inside a transaction: its next
# statement that locks the table sees it.
ok_in($long, 'BEGIN; SELECT 1;', 'a transaction begins before the extension exists');
$node->safe_psql('cycle', q{CREATE EXTENSION fencing; SELECT fencing.protect('acct');});
fails_in($long, mixed_merge('acct', 1), '0A000', 'the same transaction checks the MERGE after it');
ok_in($long, 'ROLLBACK;', 'and ends');

# 3. ALTER EXTENSION fencing UPDATE from 0.3.0 by another session.
$node->safe_psql('postgres', 'CREATE DATABASE upd');
$node->safe_psql('upd', q{
	CREATE EXTENSION fencing VERSION '0.3.0';
	CREATE TABLE t1 (id int PRIMARY KEY, v text);
	CREATE TABLE t2 (id int PRIMARY KEY, v text);
});
my $u = session($node, 'upd');
ok_in($u, q{SELECT fencing.protect('t1'); INSERT INTO t1 VALUES (1, 'one', 10);},
	'0.3.0: protect() calls its helper in schema fencing');
ok_in($u, q{SELECT fencing.acquire('before', 'w', '1 min');}, '0.3.0: a lease');
fails_in($u, lower_token('t1', 1), '23T01', '0.3.0: every table enforces');
$node->safe_psql('upd', 'ALTER EXTENSION fencing UPDATE');
is(ok_in($u, q{SELECT extversion FROM pg_extension WHERE extname = 'fencing';}, 'the update is visible'),
	'0.4.0', 'at 0.4.0');
ok_in($u, q{SELECT fencing.protect('t2');},
	'updated by another session: protect() calls its helper in schema fencing_internal');
is(ok_in($u, q{SELECT fencing.acquire('after', 'w', '1 min') > 0;
		SELECT grace_until IS NOT NULL FROM fencing.resources WHERE resource = 'after';},
		'a lease after the update'),
	"t\nt", 'written with its durable horizon (0.4.0 lease rows)');
ok_in($u, q{SELECT fencing.set_enforce('t1', false);}, 't1 switched to report-only (0.4.0 options)');
ok_in($u, lower_token('t1', 1), 'the long-lived session reads the options: the stale write is reported');
fails_in($u, mixed_merge('t1', 1), '0A000', 'the MERGE check still holds');

# 4. An update between older releases, whose scripts call nothing of the
# library's to tell the others: 0.1.0 to 0.2.0, where a stale answer would
# name a deleted key by its text (0.1.0) in 0.2.0's table of hashed keys.
sub older_update
{
	my ($server, $db, $how) = @_;
	$server->safe_psql('postgres', "CREATE DATABASE $db");
	# 0.1.0 preloads the module in its database (the update takes it back):
	# here nothing preloads it.
	$server->safe_psql($db, qq{
		CREATE EXTENSION fencing VERSION '0.1.0';
		ALTER DATABASE $db RESET session_preload_libraries;
		CREATE TABLE jobs (id int PRIMARY KEY, state text);
		SELECT fencing.protect('jobs');
		INSERT INTO jobs SELECT g, 'queued', 5 FROM generate_series(1, 4) g;
	});
	my $watcher = session($server, $db);
	ok_in($watcher, q{BEGIN; SET LOCAL fencing.token = 7; DELETE FROM jobs WHERE id = 1; COMMIT;},
		"$how: a delete marks its key with 0.1.0's objects");
	$server->safe_psql($db, q{ALTER EXTENSION fencing UPDATE TO '0.2.0'});
	ok_in($watcher, q{BEGIN; SET LOCAL fencing.token = 8; DELETE FROM jobs WHERE id = 2; COMMIT;},
		"$how: updated to 0.2.0 by another session, the watcher marks its next delete as 0.2.0 does");
	is(ok_in($watcher, q{SELECT count(*) FROM fencing.deleted_keys WHERE length(key) = 32;}, 'marks read'),
		'2', "$how: both marks are 0.2.0's");
	fails_in($watcher, q{INSERT INTO jobs VALUES (2, 'back', 7);}, '23T01',
		"$how: the mark refuses an older insert of the key");
	$watcher->quit;
}
older_update($node, 'older', 'preloaded');
my $unloaded = PostgreSQL::Test::Cluster->new('unloaded');
$unloaded->init;
$unloaded->start;
older_update($unloaded, 'older', 'not preloaded, updated by a session that loads the module in the script');

# A database $db of $server with the extension at $version and table t
# protected, and a session there that checks a MERGE into t (which loads
# the module where nothing preloads it).
sub watched_database
{
	my ($server, $db, $version) = @_;
	$server->safe_psql('postgres', "CREATE DATABASE $db");
	$server->safe_psql($db, qq{
		CREATE EXTENSION fencing VERSION '$version';
		CREATE TABLE t (id int PRIMARY KEY, v text);
		SELECT fencing.protect('t');
		INSERT INTO t VALUES (1, 'one', 10);
	});
	my $watcher = session($server, $db);
	fails_in($watcher, mixed_merge('t', 1), '0A000', "a session of $db checks the MERGE ($version)");
	return $watcher;
}

# 5. DROP EXTENSION by a session that never loads the module.
my $loaded = watched_database($unloaded, 'dropped', '0.3.0');
$unloaded->safe_psql('dropped', 'DROP EXTENSION fencing CASCADE');
ok_in($loaded, mixed_merge('t', 1),
	'dropped by a session that never loaded the module: the MERGE runs (nothing of the extension read)');

# 6. Dropped, then created again at 0.1.0, each by a fresh session of a
# server that does not preload the module.
my $watcher = watched_database($unloaded, 'again', '0.4.0');
$unloaded->safe_psql('again', 'DROP EXTENSION fencing CASCADE');
ok_in($watcher, mixed_merge('t', 1), 'dropped by another session: the MERGE runs');
is($unloaded->safe_psql('again', q{SELECT count(*) FROM pg_namespace WHERE nspname = 'fencing'}),
	'1', 'schema fencing outlives DROP EXTENSION');
$unloaded->safe_psql('again', q{CREATE EXTENSION fencing VERSION '0.1.0'});
$unloaded->safe_psql('again', q{SELECT fencing.protect('t')});
fails_in($watcher, mixed_merge('t', 1), '0A000',
	'created at 0.1.0 by a session that loaded the module in the script: the watcher checks the MERGE');

# 7. Prepared transactions: CREATE EXTENSION (and protect()) prepared by
# one session and committed by another, then DROP EXTENSION the same way,
# while a long-lived session watches: COMMIT PREPARED sends what the
# prepared transaction kept for the others.  A rolled-back prepared DROP
# changes nothing.
my $two = unprotected_database('twophase');
$node->safe_psql('twophase', q{
	BEGIN; CREATE EXTENSION fencing; SELECT fencing.protect('acct'); PREPARE TRANSACTION 'create';
});
ok_in($two, 'SELECT 1;', 'a statement while the creation is prepared');
$node->safe_psql('twophase', q{COMMIT PREPARED 'create'});
fails_in($two, mixed_merge('acct', 1), '0A000', 'committed by another session: the watcher checks the MERGE');
fails_in($two, lower_token('acct', 1), '23T01', 'and refuses a stale write');
$node->safe_psql('twophase', q{BEGIN; DROP EXTENSION fencing CASCADE; PREPARE TRANSACTION 'drop';});
$node->safe_psql('twophase', q{ROLLBACK PREPARED 'drop'});
fails_in($two, mixed_merge('acct', 1), '0A000', 'a prepared DROP rolled back: still checked');
$node->safe_psql('twophase', q{BEGIN; DROP EXTENSION fencing CASCADE; PREPARE TRANSACTION 'drop';});
$node->safe_psql('twophase', q{COMMIT PREPARED 'drop'});
ok_in($two, mixed_merge('acct', 1), 'a prepared DROP committed by another session: the MERGE runs');

# 8. The invalidation queue overflows: the watcher, busy in a statement,
# reads nothing while another session creates the extension and then makes
# thousands of catalog changes in one transaction, more than the queue
# holds.  The watcher is reset (every cache forgotten) and asks again.
my $busy = unprotected_database('overflow');
$busy->query_until(qr/sleeping/, q{\echo sleeping
SELECT pg_sleep(3);
});
$node->safe_psql('overflow', q{CREATE EXTENSION fencing; SELECT fencing.protect('acct');});
$node->safe_psql('overflow', q{
	DO $$ BEGIN
		FOR i IN 1 .. 2000 LOOP
			EXECUTE format('CREATE TABLE churn_%s (k int)', i);
			EXECUTE format('DROP TABLE churn_%s', i);
		END LOOP;
	END $$;
});
fails_in($busy, mixed_merge('acct', 1), '0A000', 'after the overflow the watcher checks the MERGE');
fails_in($busy, lower_token('acct', 1), '23T01', 'and refuses a stale write');

$two->quit;
$busy->quit;
$watcher->quit;
$with->quit;
$plain->quit;
$long->quit;
$u->quit;
$loaded->quit;
done_testing();
