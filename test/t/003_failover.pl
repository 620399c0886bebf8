# A primary with a synchronous standby: a stream of grants and fenced writes,
# the primary dies, the standby is promoted: no token is issued twice and a
# stale token is still rejected.  With the standby down, a grant cannot
# complete.  An asynchronous standby that missed the last grants does not
# issue their tokens again either: its new timeline puts its tokens in the
# next generation (and the clock, with a margin, orders them within it).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = FencingNode::new_node('primary', allows_streaming => 1);
$primary->safe_psql('postgres', q{
	CREATE TABLE items (id int PRIMARY KEY, v int);
	SELECT fencing.protect('items');
	INSERT INTO items SELECT g, 0, 1 FROM generate_series(0, 9) g;
});
my $async = FencingNode::new_standby($primary, 'async_standby', 0);
my $sync = FencingNode::new_standby($primary, 'sync_standby', 1);
$primary->wait_for_catchup('async_standby');

# With the synchronous standby down, a grant waits for it and, when canceled,
# fails without handing out its token.
$sync->stop;
my ($ret, $out, $err) = $primary->psql('postgres',
	"SET statement_timeout = '1s'; SELECT fencing.acquire('blocked', 'a', '10 s')");
isnt($ret, 0, 'a grant cannot complete while the synchronous standby is down');
like($err, qr/canceled before the new token reached the synchronous standbys/,
	'and says why');
$sync->start;
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'sync_standby'");

# The asynchronous standby falls behind (here: it is stopped) ...
$primary->wait_for_catchup('async_standby');
$async->stop;

# ... while a stream of grants and fenced writes runs on the primary.
my @tokens;
my %last_write;
for my $i (0 .. 59)
{
	my $r = 'res:' . ($i % 4);
	my $t = $primary->safe_psql('postgres', "SELECT fencing.acquire('$r', 'w$i', '10 s')");
	push @tokens, $t;
	my $k = $i % 10;
	$primary->safe_psql('postgres', qq{
		SELECT fencing.fenced_update('items', '{"id": $k}', $t, '{"v": $i}');
		SELECT fencing.release('$r', 'w$i', $t);
	});
	$last_write{$k} //= [];
	push @{ $last_write{$k} }, $t;
}
# Tokens handed out in rolled-back transactions of an asynchronous-commit
# session, just before the primary dies, must not come back either.
push @tokens, split /\n/, $primary->safe_psql('postgres', q{
	SET synchronous_commit = off;
	BEGIN; SELECT fencing.acquire('lost:1', 'a', '10 s'); ROLLBACK;
	BEGIN; SELECT fencing.acquire('lost:2', 'a', '10 s'); ROLLBACK;
});
my $max = (sort { $b <=> $a } @tokens)[0];
$primary->kill9;

$sync->promote;
cmp_ok(FencingNode::next_token($sync), '>', $max,
	'after failover to the synchronous standby, no token is issued twice');
($ret, $out, $err) = $sync->psql('postgres',
	"SELECT fencing.fenced_update('items', '{\"id\": 3}', $last_write{3}[0], '{\"v\": -1}')");
like($err, qr/stale fencing token/, 'a stale token is still rejected on the new primary');
is($sync->safe_psql('postgres', 'SELECT last_fencing_token FROM items WHERE id = 3'),
	$last_write{3}[-1], 'the newest acknowledged write is on the new primary');

# The asynchronous standby never received the stream: its sequence is behind
# every token of it.  Promoted, it still issues only higher tokens.
$async->start;
my $behind = $async->safe_psql('postgres', 'SELECT last_value FROM fencing.token_seq');
cmp_ok($behind, '<', $max, 'the asynchronous standby missed grants');
$async->promote;
my $first = FencingNode::next_token($async);
cmp_ok($first, '>', $max,
	'after failover to an asynchronous standby that missed grants, no token is issued twice');
cmp_ok($first >> 42, '==', ($max >> 42) + 1,
	'its tokens are of the next generation: its timeline is the next one');
my $clock_ms = $async->safe_psql('postgres',
	'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint');
my $low = $first & ((1 << 42) - 1);
cmp_ok($low, '>', $clock_ms + 10 * 1000 - 1000,
	'and its first token is the failover margin ahead of its clock');
is($async->safe_psql('postgres', q{
	SELECT count(*) FROM fencing.token_timelines
	WHERE timeline = ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int}),
	'1', 'the new timeline is recorded');

done_testing();
