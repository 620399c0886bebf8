# A primary with a synchronous standby: a stream of grants and fenced writes,
# the primary dies, the standby is promoted: no token is issued twice and a
# stale token is still rejected.  With the standby down, a grant cannot
# complete.  An asynchronous standby, by contrast, can lose grants.
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
$primary->backup('base');
my $sync = PostgreSQL::Test::Cluster->new('sync_standby');
$sync->init_from_backup($primary, 'base', has_streaming => 1);
$sync->start;
my $async = PostgreSQL::Test::Cluster->new('async_standby');
$async->init_from_backup($primary, 'base', has_streaming => 1);
$async->start;
$primary->append_conf('postgresql.conf', "synchronous_standby_names = 'sync_standby'\n");
$primary->reload;
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'sync_standby'")
  or die 'sync_standby did not become synchronous';
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

# The asynchronous standby never received the stream: promoted, it issues
# tokens that were already handed out.  Use synchronous standbys.
$async->start;
$async->promote;
cmp_ok(FencingNode::next_token($async), '<=', $max,
	'an asynchronous standby that lagged issues tokens again after failover (documented limit)');

done_testing();
