# Two primaries at once: a standby promoted while its old primary keeps
# running and granting (a network partition, a stalled HA agent).  Every
# token the promoted standby issues is above every token the old primary can
# still issue, whatever their clocks say: the old primary's tokens stay in
# its generation, the new timeline's are in the next one.  And
# fencing.grant_confirmation stops the cut-off primary from granting.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use FencingNode;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $old = FencingNode::new_node('old_primary', allows_streaming => 1);
$old->append_conf('postgresql.conf', "wal_receiver_status_interval = 1\n");
$old->reload;
my $before = FencingNode::next_token($old);
my $new = FencingNode::new_standby($old, 'standby', 0);
$old->wait_for_catchup('standby');

# With a standby streaming and replying, grant_confirmation = standby grants.
my $confirmed = $old->safe_psql('postgres', q{
	SET fencing.grant_confirmation = standby;
	SELECT fencing.acquire('confirmed', 'a', '10 s')});
cmp_ok($confirmed, '>', $before, 'a primary whose standby replies grants with grant_confirmation');

# The standby is promoted; the old primary is not stopped.
$new->promote;
$new->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby was not promoted';

my (@old_tokens, @new_tokens);
for my $i (0 .. 19)
{
	push @old_tokens, $old->safe_psql('postgres', "SELECT fencing.acquire('old:$i', 'a', '10 s')");
	push @new_tokens, $new->safe_psql('postgres', "SELECT fencing.acquire('new:$i', 'b', '10 s')");
}
my $old_max = (sort { $b <=> $a } @old_tokens)[0];
my $new_min = (sort { $a <=> $b } @new_tokens)[0];
cmp_ok($new_min, '>', $old_max,
	'granting side by side, every token of the promoted standby is above every token of the old primary');
is($new_min >> 42, ($old_max >> 42) + 1, 'the promoted standby issues the next generation');

my $lease = $old->safe_psql('postgres', "SELECT fencing.acquire('cut', 'a', '1 min')");

# The old primary's clock running far ahead is the same as its tokens being
# pushed to the top of its generation: here a resource's last token set
# there by hand.  It may issue the generation's last token, never more.
my $end = ((($old_max >> 42) + 1) << 42) - 1;
$old->safe_psql('postgres', qq{
	INSERT INTO fencing.resources (resource, holder, token, granted_at, expires_at, released)
	VALUES ('ahead', 'x', $end - 1, now(), now(), true)});
my $top = $old->safe_psql('postgres', "SELECT fencing.acquire('ahead', 'a', '1 ms')");
is($top, $end, 'the old primary reaches the last token of its generation');
cmp_ok(FencingNode::next_token($new), '>', $top, 'still below every token of the promoted standby');
$old->safe_psql('postgres', "SELECT pg_sleep(0.01)");
my ($ret, $out, $err) = $old->psql('postgres', "SELECT fencing.acquire('other', 'b', '1 ms')");
isnt($ret, 0, 'and issues no token past it, for any resource');
like($err, qr/the tokens of generation \d+ are used up/, 'saying why');

# The old primary lost its standby (it follows nothing now: the promoted
# one left).  With grant_confirmation it refuses grants and renewals.
$old->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_replication')
  or die 'the old primary still has a walsender';
($ret, $out, $err) = $old->psql('postgres', q{
	SET fencing.grant_confirmation = standby;
	SELECT fencing.acquire('cut:2', 'a', '10 s')});
like($err, qr/no standby can confirm this lease change/, 'a cut-off primary refuses grants');
($ret, $out, $err) = $old->psql('postgres', qq{
	SET fencing.grant_confirmation = standby;
	SELECT fencing.renew('cut', 'a', $lease, '1 min')});
like($err, qr/no standby can confirm this lease change/, 'and renewals');
is($old->safe_psql('postgres', "SELECT count(*) FROM fencing.resources WHERE resource = 'cut:2'"),
	'0', 'and changes nothing');

done_testing();
