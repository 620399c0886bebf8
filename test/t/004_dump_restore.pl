# pg_dump and restore keep every high-water mark: row tokens, deleted keys,
# resource fences; the restored database's tokens start above the original's,
# even those issued after the dump (and right after its first grant, while
# its tokens still ran the failover margin ahead of the clock); restored on
# another system, its tokens are of a higher generation.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = FencingNode::new_node('dump');
$node->safe_psql('postgres', q{
	CREATE TABLE items (id int PRIMARY KEY, v text);
	SELECT fencing.protect('items', mode => 'strict');
	INSERT INTO items VALUES (1, 'one', 10), (2, 'two', 10);
	SELECT fencing.fenced_update('items', '{"id": 1}', 20, '{"v": "one@20"}');
	BEGIN; SET LOCAL fencing.token = 30; DELETE FROM items WHERE id = 2; COMMIT;
	SELECT fencing.fence('orders', 40);
	SELECT fencing.acquire('orders', 'a', '1 hour');
});
my $max = $node->safe_psql('postgres', 'SELECT max(token) FROM fencing.leases');

my $dump = "$PostgreSQL::Test::Utils::tmp_check/fencing.dump";
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', $dump ], 'pg_dump');
# The original goes on issuing tokens after the dump was taken: a database
# restored from that dump must never issue them again.
my $after_dump = $node->safe_psql('postgres', q{
	SELECT max(t) FROM (SELECT fencing.acquire('later:' || g, 'a', '1 s') AS t
	                    FROM generate_series(1, 50) g) x});
cmp_ok($after_dump, '>', $max, 'the original issued more tokens after the dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('restored'), $dump ], 'pg_restore');

is($node->safe_psql('restored', "SELECT relation::text || ' ' || mode FROM fencing.protected_tables"),
	'items strict', 'the guard and its mode are restored');
my ($ret, $out, $err) = $node->psql('restored',
	q{SELECT fencing.fenced_update('items', '{"id": 1}', 20, '{"v": "again"}')});
like($err, qr/stale fencing token 20/, "a row's token is restored (strict: 20 again is stale)");
($ret, $out, $err) = $node->psql('restored', q{INSERT INTO items VALUES (2, 'zombie', 29)});
like($err, qr/stale fencing token 29/, "a deleted key's mark is restored");
($ret, $out, $err) = $node->psql('restored', q{SELECT fencing.fence('orders', 39)});
like($err, qr/stale fencing token 39/, "a resource's fence mark is restored");
is($node->safe_psql('restored', "SELECT holder FROM fencing.leases WHERE resource = 'orders'"),
	'a', 'leases are restored');
cmp_ok($node->safe_psql('restored',
		"SELECT fencing.acquire('new', 'b', '1 s')"), '>', $after_dump,
	'the restored database issues no token the original issued, even after the dump');
is($node->safe_psql('restored', 'SELECT count(*) FROM fencing.token_timelines'), '1',
	'timelines are restored; on the same system and timeline the first grant adds no row');
cmp_ok($node->safe_psql('restored',
		"SELECT fencing.acquire('orders', 'b', '1 s') IS NULL"), 'eq', 't',
	'the restored live lease still holds its resource');

# Restored on another system (another cluster): its tokens are of a higher
# generation than every generation the dump recorded, whatever the clocks.
my $elsewhere = FencingNode::new_node('elsewhere');
$elsewhere->safe_psql('postgres', 'CREATE DATABASE target');
$elsewhere->command_ok([ 'pg_restore', '-d', $elsewhere->connstr('target'), $dump ],
	'pg_restore on another system');
my $there = $elsewhere->safe_psql('target', "SELECT fencing.acquire('new', 'c', '1 s')");
cmp_ok($there >> 42, '>', $after_dump >> 42,
	"the other system's tokens are of a higher generation than the dumped system's");
is($elsewhere->safe_psql('target', q{
	SELECT generation - timeline FROM fencing.token_timelines t, pg_control_system() s
	WHERE t.system_identifier = s.system_identifier}),
	$node->safe_psql('postgres', 'SELECT max(generation) + 1 FROM fencing.token_timelines'),
	'its base is one above the highest generation the dump recorded');

done_testing();
