# A renewal within a lease's durable horizon skips the flush only when the
# synchronous standby has that horizon.  A durable lease change whose commit
# wait was cut short (a cancel), or WAL replayed at a restart, may be missing
# there: a renewal relying on it must then wait for the standby like a
# durable one, or a standby promoted later frees the lease before the
# holder's belief ends.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $primary = FencingNode::new_node('primary', allows_streaming => 1);
my $standby = FencingNode::new_standby($primary, 'standby', 1);
my $t = $primary->safe_psql('postgres', "SELECT fencing.acquire('job', 'a', '1 min')");
my $within = $primary->safe_psql('postgres', "SELECT fencing.renew('job', 'a', $t, '30 s')");
is($within, 't', 'with the standby up, a renewal within the horizon returns');
$standby->stop('fast');

my $session = $primary->background_psql('postgres', on_error_stop => 0);
my $pid = $session->query_safe('SELECT pg_backend_pid()');

# Sends $sql; returns whether its commit waited for the standby (within 5 s),
# after canceling that wait, and the session's stderr.
my $n = 0;
sub waits_for_standby
{
	my ($sql) = @_;
	$n++;
	$session->{stderr} = '';
	$session->{stdin} .= "$sql;\n\\echo done$n\n";
	$session->{run}->pump_nb();
	my $waited = 0;
	for (1 .. 50)
	{
		if ($primary->safe_psql('postgres',
				"SELECT wait_event = 'SyncRep' FROM pg_stat_activity WHERE pid = $pid") eq 't')
		{
			$waited = 1;
			last;
		}
		last if $session->{stdout} =~ /done$n/;
		usleep(100_000);
	}
	$primary->safe_psql('postgres', "SELECT pg_cancel_backend($pid)") if $waited;
	$session->query_until(qr/done$n/, '');
	return ($waited, $session->{stderr});
}

# A renewal beyond the horizon waits for the standby; its wait is canceled,
# and it commits locally with a warning.
my ($waited, $err) = waits_for_standby("SELECT fencing.renew('job', 'a', $t, '10 min')");
ok($waited, 'a renewal beyond the horizon waits for the standby');
like($err, qr/lease changes of this transaction may be lost/, 'and warns when that wait is canceled');
cmp_ok($primary->safe_psql('postgres',
		"SELECT grace_until > now() + interval '9 min' FROM fencing.resources WHERE resource = 'job'"),
	'eq', 't', 'the horizon moved on the primary alone');

# A renewal within the new horizon but beyond the one the standby has: it
# must not be acknowledged without the standby.
($waited) = waits_for_standby("SELECT fencing.renew('job', 'a', $t, '5 min')");
ok($waited, 'a renewal within an unconfirmed horizon waits for the standby');
# Also in a session whose synchronous_commit does not wait for standbys.
($waited) = waits_for_standby(
	"SET synchronous_commit = local; SELECT fencing.renew('job', 'a', $t, '4 min')");
ok($waited, 'also with synchronous_commit = local in the renewing session');

# After a restart, the WAL it replayed may be missing on the standby too.
$session->quit;
$primary->restart;
$session = $primary->background_psql('postgres', on_error_stop => 0);
$pid = $session->query_safe('SELECT pg_backend_pid()');
($waited) = waits_for_standby("SELECT fencing.renew('job', 'a', $t, '1 min')");
ok($waited, 'after a restart, a renewal waits for the standby to catch up');

# Once the standby has everything, renewals within the horizon need no wait.
$standby->start;
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'sync' AND flush_lsn >= pg_current_wal_lsn() FROM pg_stat_replication")
  or die 'the standby did not catch up';
my $horizon = $primary->safe_psql('postgres',
	"SELECT grace_until FROM fencing.resources WHERE resource = 'job'");
($waited) = waits_for_standby("SELECT fencing.renew('job', 'a', $t, '10 s')");
ok(!$waited, 'with the standby caught up, a renewal within the horizon does not wait');
is($primary->safe_psql('postgres',
		"SELECT grace_until = '$horizon' FROM fencing.resources WHERE resource = 'job'"),
	't', 'and leaves the horizon where it was');
$session->quit;

done_testing();
