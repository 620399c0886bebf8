# A PostgreSQL::Test::Cluster node with the fencing extension, and the
# checks the TAP tests share.
package FencingNode;

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

# A started node with fencing preloaded and created in database postgres.
sub new_node
{
	my ($name, %params) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%params);
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
	return $node;
}

# A streaming standby of $primary named $name, started, from backup 'base'
# (taken here if there is none yet); with $synchronous, the primary's only
# synchronous standby once this returns.
sub new_standby
{
	my ($primary, $name, $synchronous) = @_;
	$primary->backup('base') unless -d $primary->backup_dir . '/base';
	my $standby = PostgreSQL::Test::Cluster->new($name);
	$standby->init_from_backup($primary, 'base', has_streaming => 1);
	$standby->start;
	return $standby unless $synchronous;
	$primary->append_conf('postgresql.conf', "synchronous_standby_names = '$name'\n");
	$primary->reload;
	$primary->poll_query_until('postgres',
		"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = '$name'")
	  or die "$name did not become synchronous";
	return $standby;
}

# kill -9 of the postmaster, then a restart once its processes are gone.
sub crash_and_restart
{
	my ($node) = @_;
	my $pid = $node->{_pid};
	$node->kill9;
	for (1 .. 300)
	{
		last unless kill(0, $pid);
		select(undef, undef, undef, 0.1);
	}
	for (1 .. 60)
	{
		return if $node->start(fail_ok => 1);
		select(undef, undef, undef, 0.5);
	}
	BAIL_OUT('the node did not restart after kill -9');
}

# kill -9 of the postmaster and of every process it started, at once: no
# backend or WAL writer flushes what they hold; then a restart.
sub kill_all_and_restart
{
	my ($node) = @_;
	my $pid = $node->{_pid};
	my @children = grep { /^\d+$/ } split /\s+/, `pgrep -P $pid`;
	kill 'KILL', $pid, @children;
	for (1 .. 300)
	{
		last unless grep { kill(0, $_) } $pid, @children;
		select(undef, undef, undef, 0.1);
	}
	$node->{_pid} = undef;
	for (1 .. 60)
	{
		return if $node->start(fail_ok => 1);
		select(undef, undef, undef, 0.5);
	}
	BAIL_OUT('the node did not restart after kill -9');
}

# After a backend died by a signal: the postmaster (restart_after_crash is
# off in the TAP tests) shuts down; once it is gone, the node starts again.
sub restart_after_backend_crash
{
	my ($node) = @_;
	my $pid = $node->{_pid};
	for (1 .. 300)
	{
		last unless kill(0, $pid);
		select(undef, undef, undef, 0.1);
	}
	$node->_update_pid(-1);
	$node->start;
}

# The next token the node issues: must be above every token a client saw.
sub next_token
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT fencing.acquire('probe:' || pg_catalog.gen_random_uuid(), 'probe', '1 s')");
}

# Runs a shell loop as a background client against $node; it appends one
# line per acknowledged operation to $log and stops when the server goes away.
sub start_client
{
	my ($node, $log, $body) = @_;
	my $script = "export PGHOST='" . $node->host . "' PGPORT=" . $node->port
	  . " PGDATABASE=postgres\nq() { psql -XAtq -v ON_ERROR_STOP=1 -c \"\$1\" 2>/dev/null; }\n"
	  . "i=0\nwhile [ \$i -lt 100000 ]; do\n$body\ni=\$((i + 1))\ndone\n";
	my ($in, $out, $err) = ('', '', '');
	return IPC::Run::start([ 'bash', '-c', $script ], \$in, '>>', $log, '2>>', "$log.err");
}

# Waits until $log has at least $lines lines.
sub wait_for_lines
{
	my ($log, $lines) = @_;
	for (1 .. 600)
	{
		my $n = -e $log ? scalar(split /\n/, slurp_file($log)) : 0;
		return $n if $n >= $lines;
		select(undef, undef, undef, 0.1);
	}
	BAIL_OUT("client produced fewer than $lines lines in 60 s");
}

# The acknowledged lines of a client log: [kind, args...] each.
sub acknowledged
{
	my ($log) = @_;
	return map { [ split / / ] } grep { /\S/ } split /\n/, slurp_file($log);
}

1;
