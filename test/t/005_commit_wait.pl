# What a caller is told when the commit of a grant is not confirmed by the
# synchronous standby: the token was confirmed before acquire() returned it,
# the commit's wait is canceled, PostgreSQL and the extension warn, and after
# a failover the lease is gone - another holder gets it with a higher token,
# and the first holder's writes are refused once that token is used.
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
	INSERT INTO items VALUES (1, 0, 1);
});
my $standby = FencingNode::new_standby($primary, 'standby', 1);

# acquire() returns only once the standby has its token ...
my $session = $primary->background_psql('postgres');
my $pid = $session->query_safe('SELECT pg_backend_pid()');
$session->query_safe('BEGIN');
my $token = $session->query_safe("SELECT fencing.acquire('job', 'first', '1 h')");
like($token, qr/^\d+$/, 'the grant returned a token');
# A grant in a savepoint that rolls back is not one of the transaction's.
$session->query_safe('SAVEPOINT s');
my $undone = $session->query_safe("SELECT fencing.acquire('undone', 'first', '1 h')");
$session->query_safe('ROLLBACK TO SAVEPOINT s');
$standby->poll_query_until('postgres',
	"SELECT last_value >= $token FROM fencing.token_seq")
  or die 'the standby does not have the token';
pass('the standby had the token before acquire() returned it');

# ... but the standby goes away before the commit, and the commit's wait for
# it is canceled (statement_timeout does not reach that wait: a cancel does):
# PostgreSQL commits locally with a WARNING.
$standby->stop('fast');
$session->{stdin} .= "COMMIT;\n\\echo committed\n";
$session->{run}->pump_nb();
$primary->poll_query_until('postgres',
	"SELECT wait_event = 'SyncRep' FROM pg_stat_activity WHERE pid = $pid")
  or die 'the commit does not wait for the standby';
$primary->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
$session->query_until(qr/committed/, '');
my $warnings = $session->{stderr};
like($warnings, qr/canceling wait for synchronous replication/,
	'PostgreSQL warns that the commit was not confirmed');
like($warnings, qr/the grant of token $token may be lost if the server fails over/,
	'the extension says which grant may be lost');
like($warnings, qr/will never be issued again/, 'and that the token is safe');
unlike($warnings, qr/$undone/, 'and not the grant of the rolled-back savepoint');
$session->quit;
is($primary->safe_psql('postgres',
	"SELECT holder || ' ' || live FROM fencing.leases WHERE resource = 'job'"),
	'first true', 'the old primary has the lease');

$primary->kill9;

# Failover: the standby never saw the commit.  The lease is free there, and
# the next holder gets a higher token - never the first one's.
$standby->start;
$standby->promote;
is($standby->safe_psql('postgres', "SELECT count(*) FROM fencing.leases WHERE resource = 'job'"),
	'0', 'after failover the grant is missing');
my $second = $standby->safe_psql('postgres', "SELECT fencing.acquire('job', 'second', '1 h')");
cmp_ok($second, '>', $token, 'another holder gets the lease, with a higher token');
$standby->safe_psql('postgres',
	"SELECT fencing.fenced_update('items', '{\"id\": 1}', $second, '{\"v\": 2}')");
my ($ret, $out, $err) = $standby->psql('postgres',
	"SELECT fencing.fenced_update('items', '{\"id\": 1}', $token, '{\"v\": 3}')");
like($err, qr/stale fencing token/,
	'the first holder, still believing it holds the lease, is refused');
is($standby->safe_psql('postgres', 'SELECT v FROM items WHERE id = 1'), '2',
	'the row holds the second holder\'s write');

done_testing();
