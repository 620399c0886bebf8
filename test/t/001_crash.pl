# kill -9 during a stream of acquires, renewals, releases, fences and fenced
# writes: after restart, no token the client saw is issued again, and every
# acknowledged fence and fenced write is there.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = FencingNode::new_node('crash');
$node->safe_psql('postgres', q{
	CREATE TABLE items (id int PRIMARY KEY, v int);
	SELECT fencing.protect('items');
	INSERT INTO items SELECT g, 0, 1 FROM generate_series(0, 9) g;
});

my $log = "$PostgreSQL::Test::Utils::tmp_check/crash.log";
my $client = FencingNode::start_client($node, $log, q{
	r="res:$((i % 5))"; k=$((i % 10))
	t=$(q "SELECT fencing.acquire('$r', 'w$i', '10 s')") || exit 0
	[ -n "$t" ] || { i=$((i + 1)); continue; }
	echo "token $r $t"
	q "SELECT fencing.renew('$r', 'w$i', $t, '10 s')" >/dev/null || exit 0
	[ "$(q "SELECT fencing.fenced_update('items', '{\"id\": $k}', $t, '{\"v\": $i}')")" = t ] && echo "write $k $t"
	q "SELECT fencing.fence('$r', $t)" >/dev/null && echo "fence $r $t"
	q "SELECT fencing.release('$r', 'w$i', $t)" >/dev/null || exit 0
});

FencingNode::wait_for_lines($log, 150);
FencingNode::crash_and_restart($node);
$client->finish;

my @acks = FencingNode::acknowledged($log);
my @tokens = map { $_->[2] } grep { $_->[0] eq 'token' } @acks;
my @writes = grep { $_->[0] eq 'write' } @acks;
my @fences = grep { $_->[0] eq 'fence' } @acks;
cmp_ok(scalar(@tokens), '>=', 50, 'the client saw tokens before the crash');
cmp_ok(scalar(@writes), '>=', 40, 'and had fenced writes acknowledged');

my $max = (sort { $b <=> $a } @tokens)[0];
my %seen;
is(scalar(grep { $seen{$_}++ } @tokens), 0, 'no token was issued twice before the crash');
cmp_ok(FencingNode::next_token($node), '>', $max, 'the first token after restart is above every token seen');

my $values = join ',', map { "($_->[1], $_->[2])" } @writes;
is($node->safe_psql('postgres',
		"SELECT count(*) FROM (VALUES $values) a(id, token) JOIN items USING (id)
		 WHERE items.last_fencing_token < a.token"),
	'0', 'every acknowledged fenced write is present');
$values = join ',', map { "('$_->[1]', $_->[2])" } @fences;
is($node->safe_psql('postgres',
		"SELECT count(*) FROM (VALUES $values) a(resource, token)
		 LEFT JOIN fencing.fences f USING (resource)
		 WHERE f.token IS NULL OR f.token < a.token"),
	'0', 'every acknowledged fence is present');

# The high-water marks still reject the oldest holders.
my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT fencing.fenced_update('items', '{\"id\": $writes[0][1]}', $writes[0][2], '{\"v\": -1}')");
like($err, qr/stale fencing token/, 'a stale token is still rejected after the crash');

done_testing();
