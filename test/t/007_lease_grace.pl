# The durable horizon of leases: renewals within a lease's grace_until and
# releases commit without a WAL flush, and a kill -9 that loses them lets no
# other holder in before the last acknowledged belief ends.  A holder
# believes it holds a lease until the start of its last acknowledged
# acquire() or renew() + ttl (docs/ha.md), or until it starts its release().
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = FencingNode::new_node('grace');
# Flushes counted (fsync on); commits that need no flush stay in the WAL
# buffers until a flush that some other commit needs.
$node->append_conf('postgresql.conf', "fsync = on\nwal_writer_delay = 10s\n");
$node->restart;

sub sql { return $node->safe_psql('postgres', $_[0]); }
# WAL flushes so far: pg_stat_wal's wal_sync until 17; PostgreSQL 18 moved
# the WAL's I/O counts to pg_stat_io.
my $wal_syncs =
  sql('SHOW server_version_num') >= 180000
  ? "SELECT sum(fsyncs) FROM pg_stat_io WHERE object = 'wal'"
  : 'SELECT wal_sync FROM pg_stat_wal';
sub syncs { return sql($wal_syncs); }

# 1. Which calls flush.
my $t = sql("SELECT fencing.acquire('flush', 'a', '1 min')");
my $before = syncs();
sql("SELECT fencing.renew('flush', 'a', $t, '1 min')") for 1 .. 30;
cmp_ok(syncs() - $before, '<=', 3, 'renewals within the horizon are not flushed');
$before = syncs();
sql("SET fencing.lease_durability = 'always'; SELECT fencing.renew('flush', 'a', $t, '1 min')")
  for 1 .. 10;
cmp_ok(syncs() - $before, '>=', 10, "with lease_durability = 'always' each renewal is flushed");
my $released = 0;
for (1 .. 10)
{
	my $u = sql("SELECT fencing.acquire('flush:$_', 'a', '1 min')");
	$before = syncs();
	sql("SELECT fencing.release('flush:$_', 'a', $u)");
	$released += syncs() - $before;
}
cmp_ok($released, '<=', 3, 'releases are not flushed');
$before = syncs();
sql("SELECT fencing.acquire('flush:new', 'a', '1 min')");
cmp_ok(syncs() - $before, '>=', 1, 'a grant is flushed');
$before = syncs();
sql("SELECT fencing.renew('flush', 'a', $t, '1 h')");
cmp_ok(syncs() - $before, '>=', 1, 'a renewal beyond the horizon is flushed');

# 2. Renewals lost by a kill -9: the lease is held until its horizon, so the
# next holder's grant comes after the last acknowledged belief.
$t = sql("SELECT fencing.acquire('solo', 'a', '1 s')");
my $belief = 0;
for (1 .. 20)
{
	my $start = time();
	$belief = $start + 1 if sql("SELECT fencing.renew('solo', 'a', $t, '1 s')") eq 't';
	usleep(20_000);
}
FencingNode::kill_all_and_restart($node);
my ($stored, $horizon) = split /\|/, sql(
	"SELECT extract(epoch FROM expires_at), extract(epoch FROM grace_until)
	 FROM fencing.resources WHERE resource = 'solo'");
cmp_ok($stored, '<', $belief - 0.1, 'the crash lost the last acknowledged renewals');
cmp_ok($horizon, '>=', $belief, 'the horizon covers the last belief');
is(sql("SELECT live AND expires_at = (SELECT grace_until FROM fencing.resources WHERE resource = 'solo')
	  FROM fencing.leases WHERE resource = 'solo'"),
	't', 'fencing.leases shows the lease held until its horizon');
my $u = sql("SELECT fencing.acquire('solo', 'b', '1 min', '1 min')");
my $granted = sql("SELECT extract(epoch FROM granted_at) FROM fencing.resources WHERE resource = 'solo'");
ok($u > $t, 'the waiter got the lease');
cmp_ok($granted, '>=', $belief, 'no earlier than the end of the lost holder\'s belief');
cmp_ok($granted, '<', $horizon + 1, 'woken at the horizon');

# 3. kill -9 during a stream of grants, renewals and releases on shared
# resources, then grants: no grant falls inside another holder's belief.
my $log = "$PostgreSQL::Test::Utils::tmp_check/grace.log";
unlink $log;
my @clients;
for my $c (1 .. 3)
{
	push @clients, FencingNode::start_client($node, $log, qq{
	r="res:\$((RANDOM % 4))"; h="c${c}_\$i"
	s=\$(date +%s.%N)
	t=\$(q "SELECT fencing.acquire('\$r', '\$h', '1 s')") || exit 0
	if [ -n "\$t" ]; then
		echo "grant \$r \$t \$s"
		for k in 1 2 3 4 5 6 7 8 9 10; do
			s=\$(date +%s.%N)
			ok=\$(q "SELECT fencing.renew('\$r', '\$h', \$t, '1 s')") || exit 0
			[ "\$ok" = t ] && echo "renew \$r \$t \$s"
		done
		if [ \$((i % 4)) -ne 0 ]; then
			s=\$(date +%s.%N)
			ok=\$(q "SELECT fencing.release('\$r', '\$h', \$t)") || exit 0
			[ "\$ok" = t ] && echo "release \$r \$t \$s"
		fi
	fi
	});
}
# A keeper renews its lease all the time: its renewals since the others' last
# grant (which flushed them) are what a crash loses.
push @clients, FencingNode::start_client($node, $log, q{
	s=$(date +%s.%N)
	if [ -z "$t" ]; then
		t=$(q "SELECT fencing.acquire('res:keep', 'keeper', '1 s')") || exit 0
		[ -n "$t" ] && echo "grant res:keep $t $s"
	else
		ok=$(q "SELECT fencing.renew('res:keep', 'keeper', $t, '1 s')") || exit 0
		[ "$ok" = t ] && echo "renew res:keep $t $s"
		[ "$ok" = f ] && t=
	fi
});
FencingNode::wait_for_lines($log, 600);
FencingNode::kill_all_and_restart($node);
$_->finish for @clients;

# Each token's belief: from its acknowledged calls; a release ends it.
my (%until, %ended);
for my $ack (FencingNode::acknowledged($log))
{
	my ($kind, $r, $tok, $start) = @$ack;
	next unless defined $start;
	if ($kind eq 'release') { $ended{"$r $tok"} = $start; next; }
	my $end = $start + 1;
	$until{"$r $tok"} = $end if !defined $until{"$r $tok"} || $end > $until{"$r $tok"};
}
my (%belief, $lost);
for my $key (keys %until)
{
	my ($r) = split / /, $key;
	my $end = defined $ended{$key} && $ended{$key} < $until{$key} ? $ended{$key} : $until{$key};
	$belief{$r} = $end if !defined $belief{$r} || $end > $belief{$r};
}
# Beliefs that the stored rows no longer cover: without the horizon, the
# lease would be free before they end.
for my $r (sort keys %belief)
{
	my $row = sql("SELECT token || ' ' || extract(epoch FROM expires_at) || ' ' || released
	             FROM fencing.resources WHERE resource = '$r'");
	my ($tok, $expires, $rel) = split / /, $row;
	$lost++ if $rel eq 'false' && exists $until{"$r $tok"} && !defined $ended{"$r $tok"}
	  && $expires < $until{"$r $tok"};
}
note('resources whose last acknowledged renewal the crash lost: ' . ($lost // 0));
my $overlaps = 0;
for my $r (sort keys %belief)
{
	my $tok = sql("SELECT fencing.acquire('$r', 'after', '1 min', '1 min')");
	my $at = sql("SELECT extract(epoch FROM granted_at) FROM fencing.resources
	            WHERE resource = '$r' AND token = $tok");
	$overlaps++ if $at < $belief{$r};
	note("$r: granted after the crash at $at, last belief before it ended at $belief{$r}");
}
cmp_ok(scalar(keys %belief), '>=', 4, 'the stream held leases on the shared resources');
is($overlaps, 0, 'no grant after the crash falls inside a belief from before it');

# 4. A renewal in a transaction that has written (here a renewal past the
# horizon, whose new grace_until is not durable before the commit) is not
# kept in memory alone: a rollback does not take back what the memory
# keeps (docs/leases.md), so it would promise an expiry past the durable
# horizon, which a kill -9 then ends early.
$t = sql("SELECT fencing.acquire('txn', 'a', '1 s')");
sql("BEGIN; SELECT fencing.renew('txn', 'a', $t, '20 s');
	SELECT fencing.renew('txn', 'a', $t, '25 s'); ROLLBACK");
is( sql("SELECT l.expires_at <= r.grace_until
	  FROM fencing.leases l JOIN fencing.resources r USING (resource) WHERE resource = 'txn'"),
	't', 'after the rollback the lease\'s expiry is within its durable horizon');

done_testing();
