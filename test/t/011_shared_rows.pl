# The server's shared rows between databases, with small tables
# (fencing.stats_max and fencing.rollout_report_max at their least, 100):
#  - fencing.stats: the roles of one database fencing many resources evict
#    their own database's counters, not another's;
#  - fencing.rollout_report: beyond its groups, each database's writes go to
#    that database's own overflow rows, which only it sees and resets.
# (The lease counters' fair shares are in sql/lease_stats_databases.sql.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = FencingNode::new_node('shared_rows');
$node->append_conf('postgresql.conf', "fencing.stats_max = 100\nfencing.rollout_report_max = 100\n");
$node->restart;
for my $db ('victim', 'noisy')
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION fencing');
}

# The victim's table: a write accepted, one reported.
$node->safe_psql('victim', q{
	CREATE TABLE ledger (id int PRIMARY KEY, v text);
	SELECT fencing.protect('ledger', enforce => false);
	BEGIN; SET LOCAL fencing.token = 100; INSERT INTO ledger VALUES (1, 'a'); COMMIT;
	BEGIN; SET LOCAL fencing.token = 5; UPDATE ledger SET v = 'stale' WHERE id = 1; COMMIT;
});
my $victim_stats = q{SELECT writes_accepted || ' ' || stale_reported FROM fencing.stats
	WHERE relation = 'ledger'::regclass};
is($node->safe_psql('victim', $victim_stats), '2 1', 'the victim database counts its writes');

# fencing.stats: 150 resources fenced in the noisy database, 100 entries in all.
$node->safe_psql('noisy', q{
	SELECT count(fencing.fence('noise:' || i, 1)) FROM generate_series(1, 150) i});
is($node->safe_psql('noisy', q{SELECT count(*) FROM fencing.stats WHERE resource LIKE 'noise:%'}),
	'99', 'the noisy database keeps what is left of the entries');
is($node->safe_psql('victim', $victim_stats), '2 1',
	'the victim database\'s counters were not evicted by the other database\'s');

# fencing.rollout_report: the noisy database takes every group (75 by role
# and application, then one per relation and reason, 25 tables), and then
# its overflow rows.
$node->safe_psql('noisy', q{
	DO $$
	BEGIN
		FOR t IN 1 .. 30 LOOP
			EXECUTE format('CREATE TABLE n%s (id int PRIMARY KEY, v text)', t);
			PERFORM fencing.protect(format('n%s', t)::regclass, enforce => false);
			EXECUTE format('INSERT INTO n%s VALUES (1, %L, 100)', t, 'a');
		END LOOP;
	END
	$$;
});
$node->safe_psql('noisy', q{
	DO $$
	BEGIN
		PERFORM pg_catalog.set_config('fencing.token', '5', true);
		FOR a IN 1 .. 80 LOOP
			PERFORM pg_catalog.set_config('application_name', 'noisy ' || a, true);
			UPDATE n1 SET v = 'stale' WHERE id = 1;
		END LOOP;
		FOR t IN 2 .. 30 LOOP
			EXECUTE format('UPDATE n%s SET v = %L WHERE id = 1', t, 'stale');
		END LOOP;
	END
	$$;
});
my $overflow = q{SELECT coalesce(sum(count), 0) FROM fencing.rollout_report WHERE relation IS NULL};
my $noisy_overflow = $node->safe_psql('noisy', $overflow);
cmp_ok($noisy_overflow, '>', 0, "the noisy database's writes overflowed ($noisy_overflow)");
# A new group of the victim's: no room for it either, its own overflow row.
$node->safe_psql('victim', q{
	SET application_name = 'new writer';
	BEGIN; SET LOCAL fencing.token = 5; UPDATE ledger SET v = 'stale again' WHERE id = 1; COMMIT;
});
is($node->safe_psql('victim', $overflow), '1',
	'the victim database sees its own overflow row only');
is($node->safe_psql('victim', q{SELECT stale_reported FROM fencing.stats WHERE relation = 'ledger'::regclass}),
	'1', 'fencing.stats does not count the overflowed write (as documented)');
$node->safe_psql('victim', 'SELECT fencing.rollout_report_reset()');
is($node->safe_psql('victim', $overflow), '0', 'its reset empties its overflow row');
is($node->safe_psql('noisy', $overflow), $noisy_overflow, 'and not the other database\'s');

# The noisy database dropped: its groups are freed for the others.
$node->safe_psql('postgres', 'DROP DATABASE noisy');
$node->safe_psql('victim', q{
	SET application_name = 'after the drop';
	BEGIN; SET LOCAL fencing.token = 5; UPDATE ledger SET v = 'stale once more' WHERE id = 1; COMMIT;
});
$node->safe_psql('victim', 'SELECT count(*) FROM fencing.rollout_report');
$node->safe_psql('victim', q{
	SET application_name = 'after the drop';
	BEGIN; SET LOCAL fencing.token = 5; UPDATE ledger SET v = 'and again' WHERE id = 1; COMMIT;
});
is($node->safe_psql('victim', q{SELECT count FROM fencing.rollout_report
	WHERE application_name = 'after the drop'}), '1',
	'once a reader freed the dropped database\'s groups, the victim\'s new writer has its group');

done_testing();
