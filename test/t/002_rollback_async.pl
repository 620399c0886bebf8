# Tokens handed out in transactions that roll back, or that commit with
# synchronous_commit = off, are never issued again after a crash, even when
# the WAL writer would not have written them yet.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = FencingNode::new_node('async');
# Keep WAL in memory as long as possible: only an explicit flush writes it.
$node->append_conf('postgresql.conf', "wal_writer_delay = 10000ms\nwal_writer_flush_after = 0\n");
$node->restart;

# Rolled-back grants: the caller holds the number, the grant is gone.
my @rolled_back = split /\n/, $node->safe_psql('postgres', q{
	SET synchronous_commit = off;
	BEGIN; SELECT fencing.acquire('r1', 'a', '10 s'); ROLLBACK;
	BEGIN; SELECT fencing.acquire('r2', 'a', '10 s'); ROLLBACK;
	BEGIN; SELECT fencing.acquire('r3', 'a', '10 s'); ROLLBACK;
});
# Grants and fences committed by a session that asked for asynchronous commit.
my @committed = split /\n/, $node->safe_psql('postgres', q{
	SET synchronous_commit = off;
	SELECT fencing.acquire('c1', 'a', '1 hour');
	SELECT fencing.acquire('c2', 'a', '1 hour');
	SELECT fencing.fence('c3', 77);
	BEGIN;
	SELECT fencing.fence('c4', 88);
	SET LOCAL synchronous_commit = off;
	COMMIT;
});
is(scalar(@rolled_back), 3, 'three tokens from rolled-back transactions');
FencingNode::crash_and_restart($node);

my $max = (sort { $b <=> $a } @rolled_back, @committed[0 .. 1])[0];
is(scalar(@committed), 4, 'two grants and two fences acknowledged');
cmp_ok(FencingNode::next_token($node), '>', $max,
	'no token is issued again after a crash, whatever the caller did');
is($node->safe_psql('postgres',
		"SELECT string_agg(resource || '=' || token, ',' ORDER BY resource) FROM fencing.leases WHERE live AND resource LIKE 'c%'"),
	"c1=$committed[0],c2=$committed[1]",
	'grants acknowledged under synchronous_commit = off survive the crash');
is($node->safe_psql('postgres', "SELECT token FROM fencing.fences WHERE resource = 'c3'"),
	'77', 'a fence acknowledged under synchronous_commit = off survives the crash');
is($node->safe_psql('postgres', "SELECT token FROM fencing.fences WHERE resource = 'c4'"),
	'88', 'also when the transaction turned synchronous_commit off after the fence');

done_testing();
