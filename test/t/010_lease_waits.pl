# Tokens stay unique and waiters' answers stay true when things go wrong
# around a wait:
#  - several roles (each with USAGE on fencing) calling acquire() - tries and
#    waits - renew_all() and release() at once, from pgbench with a fixed
#    seed: no token is issued twice, each resource's grants rise in the
#    order they were made, and the last grant is the one the lease holds;
#  - a waiting acquire() whose backend is terminated, one during which the
#    postmaster is killed (kill -9), and one killed itself with -9 (the
#    postmaster restarts every backend): no waiter is left in the queue (a
#    try after the release is granted at once), the waiter got no lease, and
#    the next token is above every token seen;
#  - a standby promoted while a waiter waits on the old primary (which keeps
#    running): the waiter is granted there when the holder releases, with a
#    token of the old generation, below every token of the promoted standby,
#    which fences it out.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);

my $node = FencingNode::new_node('waits', allows_streaming => 1);
$node->append_conf('postgresql.conf', "max_connections = 40\n");
$node->restart;

# --- Several roles at once --------------------------------------------------
my @roles = map { "lease_role_$_" } 1 .. 4;
$node->safe_psql('postgres', join '', map { "CREATE ROLE $_ LOGIN; GRANT USAGE ON SCHEMA fencing TO $_;" } @roles);
$node->safe_psql('postgres', q{
	CREATE TABLE public.issued (token bigint, resource text, holder text, at timestamptz);
	GRANT INSERT ON public.issued TO PUBLIC;
});
my $script = "$PostgreSQL::Test::Utils::tmp_check/lease_roles.sql";
open my $fh, '>', $script or die $!;
print $fh <<'SQL';
\set r random(1, 6)
\set w random(0, 2)
\set x random(0, 3)
BEGIN;
INSERT INTO public.issued (token, resource, holder, at)
  SELECT t, 'res:' || :r, current_user || ':' || :client_id, pg_catalog.clock_timestamp()
  FROM fencing.acquire('res:' || :r, current_user || ':' || :client_id, '300 ms',
                       (:w * 20) * interval '1 ms') t
  WHERE t IS NOT NULL;
COMMIT;
SELECT count(*) FROM fencing.renew_all(current_user || ':' || :client_id, '300 ms',
  ARRAY(SELECT l.resource FROM fencing.leases l
        WHERE l.holder = current_user || ':' || :client_id ORDER BY l.resource),
  ARRAY(SELECT l.token FROM fencing.leases l
        WHERE l.holder = current_user || ':' || :client_id ORDER BY l.resource));
\if :x = 0
SELECT fencing.release(l.resource, l.holder, l.token) FROM fencing.leases l
WHERE l.holder = current_user || ':' || :client_id;
\endif
\if :x = 1
BEGIN;
SELECT fencing.acquire('burned:' || :r, current_user, '1 s');
ROLLBACK;
\endif
SQL
close $fh;

my @benches;
for my $i (0 .. $#roles)
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-c', '3', '-T', '6', '--random-seed', 1000 + $i, '-f', $script,
		  '-h', $node->host, '-p', $node->port, '-U', $roles[$i], 'postgres' ],
		'>', \$out, '2>', \$err);
	push @benches, [ $h, \$out, \$err ];
}
for my $b (@benches)
{
	$b->[0]->finish;
	is($b->[0]->result(0), 0, 'pgbench of one role ran without a failed transaction')
	  or diag ${ $b->[2] };
}
my ($grants, $distinct, $resources) = split /\|/, $node->safe_psql('postgres',
	'SELECT count(*), count(DISTINCT token), count(DISTINCT resource) FROM public.issued');
cmp_ok($grants, '>=', 100, "the roles were granted leases ($grants grants on $resources resources)");
is($distinct, $grants, 'no token was issued twice');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT token, lag(token) OVER (PARTITION BY resource ORDER BY at) AS before
	                      FROM public.issued) g
	WHERE g.before >= g.token}), '0', 'each resource\'s grants rise in the order they were made');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT resource, max(token) AS last FROM public.issued GROUP BY resource) i
	JOIN fencing.resources r USING (resource) WHERE r.token <> i.last}), '0',
	'the token each lease holds is its last grant (renew_all() changed no token)');
is($node->safe_psql('postgres', q{
	SELECT count(DISTINCT split_part(holder, ':', 1)) FROM public.issued}), scalar(@roles),
	'every role was granted');
my ($waits, $renewals) = split /\|/, $node->safe_psql('postgres', q{
	SELECT waits, renewals FROM fencing.lease_stats WHERE prefix = 'res:'});
cmp_ok($waits, '>', 0, "acquire() waited ($waits waits)");
cmp_ok($renewals, '>', 0, "renew_all() renewed ($renewals renewals)");
my $max = $node->safe_psql('postgres', 'SELECT max(token) FROM public.issued');
cmp_ok(FencingNode::next_token($node), '>', $max, 'the next token is above every grant (and burned token)');

# --- A waiter terminated, and a crash during a wait --------------------------

# Starts acquire(resource, holder, 1 min ttl, 60 s wait) in the background;
# returns the harness, its output, and the backend's pid once it waits.
sub start_waiter
{
	my ($on, $resource, $holder) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-h', $on->host, '-p', $on->port, '-d', 'postgres',
		  '-c', "SET application_name = 'waiter'; SELECT fencing.acquire('$resource', '$holder', '1 min', '60 s')" ],
		'>', \$out, '2>', \$err);
	my $pid = '';
	for (1 .. 100)
	{
		$pid = $on->safe_psql('postgres', q{
			SELECT pid FROM pg_stat_activity WHERE application_name = 'waiter'
			AND wait_event_type = 'Extension'});
		last if $pid ne '';
		usleep(100_000);
	}
	die 'the waiter did not start waiting' if $pid eq '';
	return ($h, \$out, \$err, $pid);
}

my $held = $node->safe_psql('postgres', "SELECT fencing.acquire('wait:term', 'holder', '1 min')");
my ($h, $out, $err, $pid) = start_waiter($node, 'wait:term', 'waiter');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
$h->finish;
like($$err, qr/terminat/, 'the terminated waiter was told its connection ended');
is($$out, '', 'and got no token');
$node->safe_psql('postgres', "SELECT fencing.release('wait:term', 'holder', $held)");
my $try = $node->safe_psql('postgres', "SELECT fencing.acquire('wait:term', 'next', '1 min')");
cmp_ok($try, '>', $held, 'no waiter is left queued: a try after the release is granted at once');

$held = $node->safe_psql('postgres', "SELECT fencing.acquire('wait:crash', 'holder', '2 s')");
($h, $out, $err, $pid) = start_waiter($node, 'wait:crash', 'waiter');
my $seen = $node->safe_psql('postgres', 'SELECT max(token) FROM fencing.resources');
FencingNode::crash_and_restart($node);
$h->finish;
is($$out, '', 'the waiter of a crashed server got no token');
like($$err, qr/terminat|connection|server closed/i, 'and was told its connection ended');
is($node->safe_psql('postgres', q{SELECT holder FROM fencing.resources WHERE resource = 'wait:crash'}),
	'holder', 'the lease was never granted to it');
# The holder's lease is held until its horizon after the restart; then a
# try is granted at once: no waiter survived the crash in the queue.
$node->poll_query_until('postgres', q{
	SELECT state <> 'held' FROM fencing.leases WHERE resource = 'wait:crash'}) or die 'lease stays held';
$try = $node->safe_psql('postgres', "SELECT fencing.acquire('wait:crash', 'next', '1 min')");
cmp_ok($try, '>', $seen, 'after the crash, a try is granted with a token above every token seen');

# kill -9 of the waiting backend: the postmaster ends every backend (and,
# with restart_after_crash on, restarts them: shared memory, the queue with
# it, starts anew; in the TAP tests it is off, so the node starts again).
$held = $node->safe_psql('postgres', "SELECT fencing.acquire('wait:kill', 'holder', '2 s')");
($h, $out, $err, $pid) = start_waiter($node, 'wait:kill', 'waiter');
$seen = $node->safe_psql('postgres', 'SELECT max(token) FROM fencing.resources');
kill 'KILL', $pid;
$h->finish;
FencingNode::restart_after_backend_crash($node);
is($$out, '', 'the waiter killed with -9 got no token');
$node->poll_query_until('postgres', q{
	SELECT state <> 'held' FROM fencing.leases WHERE resource = 'wait:kill'}) or die 'lease stays held';
is($node->safe_psql('postgres', q{SELECT holder FROM fencing.resources WHERE resource = 'wait:kill'}),
	'holder', 'nor the lease');
$try = $node->safe_psql('postgres', "SELECT fencing.acquire('wait:kill', 'next', '1 min')");
cmp_ok($try, '>', $seen, 'after the backend crash, a try is granted with a token above every token seen');

# --- A promotion during a wait -----------------------------------------------
my $standby = FencingNode::new_standby($node, 'promoted', 0);
$node->safe_psql('postgres', q{
	CREATE TABLE jobs (id int PRIMARY KEY, v text);
	SELECT fencing.protect('jobs');
	INSERT INTO jobs VALUES (1, 'a', 1);
});
$held = $node->safe_psql('postgres', "SELECT fencing.acquire('wait:promo', 'holder', '1 min')");
$node->wait_for_catchup('promoted');
my ($r, $o1, $e1) = $standby->psql('postgres',
	"SELECT fencing.acquire('wait:promo', 'standby waiter', '1 min', '60 s')");
like($e1, qr/read-only|recovery/, 'a wait on the standby is refused at once: it could never be granted');
($h, $out, $err, $pid) = start_waiter($node, 'wait:promo', 'waiter');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'not promoted';
my $promoted = $standby->safe_psql('postgres', "SELECT fencing.acquire('after:promo', 'b', '1 min')");
$node->safe_psql('postgres', "SELECT fencing.release('wait:promo', 'holder', $held)");
$h->finish;
chomp(my $waited = $$out);
like($waited, qr/^\d+$/, 'the waiter on the old primary is granted when the holder releases there');
is($node->safe_psql('postgres', q{SELECT holder || ' ' || token FROM fencing.resources WHERE resource = 'wait:promo'}),
	"waiter $waited", 'its answer is what the old primary recorded');
cmp_ok($promoted, '>', $waited, 'the promoted standby\'s token is above it');
is($promoted >> 42, ($waited >> 42) + 1, 'of the next generation');
$standby->safe_psql('postgres', "SELECT fencing.fenced_update('jobs', '{\"id\": 1}', $promoted, '{\"v\": \"new\"}')");
my ($ret, $o, $e) = $standby->psql('postgres',
	"SELECT fencing.fenced_update('jobs', '{\"id\": 1}', $waited, '{\"v\": \"old waiter\"}')");
like($e, qr/stale fencing token/, 'the waiter\'s token is fenced out on the promoted standby');

done_testing();
