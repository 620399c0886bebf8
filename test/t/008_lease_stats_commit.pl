# The lease counters are counted at commit under one lock: a transaction
# with many lease calls (here 60000 grants on distinct resources, far more
# than the leases the counters remember) must not hold up the commits of
# other sessions' lease calls while it is counted, and every call counts.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = FencingNode::new_node('lease_stats_commit');
$node->safe_psql('postgres', 'SELECT fencing.lease_stats_reset()');

my ($out, $err) = ('', '');
my $bulk = IPC::Run::start(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c',
	  "SELECT count(fencing.acquire('bulk:' || i, 'a', '1 min')) FROM generate_series(1, 60000) i" ],
	'>', \$out, '2>', \$err);

# Lease calls of another session, one transaction each, while the bulk
# transaction runs and commits: the slowest of them.
my ($slowest, $probes) = (0, 0);
while ($bulk->pumpable)
{
	my $started = time;
	$node->safe_psql('postgres', "SELECT fencing.acquire('probe:' || $probes, 'p', '1 min')");
	my $took = time - $started;
	$slowest = $took if $took > $slowest;
	$probes++;
	$bulk->pump_nb;
}
$bulk->finish;
is($?, 0, 'the bulk transaction committed') or diag($err);
cmp_ok($probes, '>', 10, 'other sessions called while it ran');
cmp_ok($slowest, '<', 1.0,
	"no other session's lease call waited a second for the bulk transaction's counting (slowest: "
	  . sprintf('%.3f s', $slowest) . ')');
is($node->safe_psql('postgres', "SELECT grants FROM fencing.lease_stats WHERE prefix = 'bulk:'"),
	'60000', 'every grant of the bulk transaction is counted');
is($node->safe_psql('postgres', "SELECT grants FROM fencing.lease_stats WHERE prefix = 'probe:'"),
	$probes, 'every grant of the other session is counted');

# Leases the counters still remember are measured: a renewal and a release
# of the last bulk grant, and of a lease taken after.
$node->safe_psql('postgres', q{
	SELECT fencing.renew('bulk:60000', 'a', (SELECT token FROM fencing.leases WHERE resource = 'bulk:60000'), '1 min');
	SELECT fencing.release('bulk:60000', 'a', (SELECT token FROM fencing.leases WHERE resource = 'bulk:60000'));
});
is($node->safe_psql('postgres',
		"SELECT renewal_gaps || ',' || hold_times FROM fencing.lease_health WHERE prefix = 'bulk:'"),
	'2,1', 'a remembered lease is measured (gaps up to the renewal and the release, a hold time)');

$node->stop;
done_testing();
