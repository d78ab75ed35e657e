# A session's end and a share granted in the same instant (issue 27, a review finding).  The exit
# sweep (src/store/group.c, fl_group_end_session) locks the rows of the session's groups and
# recomputes each group's deadline from its remaining holders.  It did both in one statement,
# whose snapshot is taken before the lock: a share granted and committed between that snapshot
# and the lock was not among the remaining holders, the group was released under it, and a
# writer's exclusive grant overlapped the live share.  The window is a few microseconds, so the
# test forces it with gdb: the ending backend stops at its first row lock inside the sweep, the
# share is granted and committed meanwhile, and the backend goes on.  Now the group rows are
# locked first and the holders read with a snapshot taken after the lock: the late share keeps
# the group, the writer is refused.  Skipped where gdb is missing or may not attach (the 17 and
# 18 roots have no gdb; a container may forbid ptrace).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use FencelockTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $gdb = `command -v gdb 2>/dev/null`;
chomp $gdb;
plan skip_all => 'gdb is not installed' unless $gdb;

my $node = fl_node('sweeprace');
my $timeout = $PostgreSQL::Test::Utils::timeout_default;
my $dir = PostgreSQL::Test::Utils::tempdir;

# Can this user attach to a backend at all?
my $probe = fl_background($node, 'probe', q{SELECT pg_sleep(300)});
my $probe_pid;
for (my $t = 0; $t < $timeout * 10 && !$probe_pid; $t++)
{
	$probe_pid = $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE application_name = 'probe'
		  AND wait_event = 'PgSleep'});
	usleep(100_000) unless $probe_pid;
}
my $attach = `$gdb -q -batch -p $probe_pid -ex 'info sharedlibrary' </dev/null 2>&1`;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($probe_pid)");
$probe->{h}->finish;
if ($attach !~ /fencelock\.so/)
{
	$node->stop;
	plan skip_all => 'gdb may not attach to a backend here';
}

# S holds a session-bound share, the group's only holder.
my $s = fl_client($node->connstr('postgres'));
like($s->query(q{SELECT fencelock.acquire_shared('race', 's', '1 hour', session => true)}),
	qr/^\d+$/, 'S holds a session-bound share');
my $s_pid = $s->query('SELECT pg_backend_pid()');

# At S's first row lock in the sweep, T's share (1 hour) is granted and committed.
my $host = $node->host;
my $port = $node->port;
my $t_out = "$dir/t.out";
open(my $cmd, '>', "$dir/gdb.cmd") or die;
print $cmd <<"EOF";
set pagination off
break fl_group_end_session
commands 1
  silent
  break heap_lock_tuple
  commands 2
    silent
    delete 2
    shell psql -X -At -h '$host' -p $port -d postgres -c "SELECT fencelock.acquire_shared('race', 't', '1 hour')" > '$t_out' 2>&1
    continue
  end
  continue
end
continue
EOF
close $cmd;
my ($g_out, $g_err) = ('', '');
my $g = IPC::Run::start([ $gdb, '-q', '-batch', '-p', $s_pid, '-x', "$dir/gdb.cmd" ],
	'<', \undef, '>', \$g_out, '2>', \$g_err, IPC::Run::timeout($timeout));
for (my $t = 0; $t < $timeout * 10 && $g_out !~ /Breakpoint 1 at/; $t++)
{
	$g->pump_nb;
	usleep(100_000);
}
like($g_out, qr/Breakpoint 1 at/, 'gdb is attached to S');
usleep(500_000);    # gdb continues S after setting its breakpoint
$s->quit;
$g->finish;
is(slurp_file($t_out), "2\n", "T's share was granted while S's sweep was about to lock");

is($node->safe_psql('postgres',
	q{SELECT string_agg(owner || ' ' || state, ', ' ORDER BY owner) FROM fencelock.lease_holders
	   WHERE resource = 'race'}),
	't held', "S's share is gone, T's stays");
is($node->safe_psql('postgres',
	q{SELECT mode || ' ' || state || ' ' || (expires_at > now() + interval '50 minutes')
	    FROM fencelock.leases WHERE resource = 'race'}),
	'shared held true', "the group is held, until T's deadline");
is($node->safe_psql('postgres',
	q{SELECT fencelock.acquire('race', 'writer', '1 minute') IS NULL}),
	't', 'a writer is refused while T holds its share');

done_testing();
