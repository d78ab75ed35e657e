# Issue 35, class search (caches marked valid before they are complete): the check that the
# statements run on the extension's own table (src/base/asowner.c) marked its lookup found before the
# check had passed.  A check that failed (fencelock.lease no longer a member of the extension)
# left it found, and the session's next call, finding the schema and the table still named and
# owned as before, skipped the check and ran the statements on that table.  Each call must be
# refused until the table is the extension's again.
use strict;
use warnings FATAL => 'all';

use FencelockTest;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = fl_node('extcheck');
$node->safe_psql('postgres', 'ALTER EXTENSION fencelock DROP TABLE fencelock.lease');
my ($out, $err) = ('', '');
$node->psql('postgres', q{
	\set VERBOSITY verbose
	SELECT fencelock.acquire('x', 'o', '1 hour');
	SELECT fencelock.acquire('x', 'o', '1 hour');
	SELECT fencelock.current_fence('x');},
	stdout => \$out, stderr => \$err, on_error_stop => 0);
is($out, '', 'no call of the session ran');
is((() = $err =~ /ERROR:  55000: table fencelock\.lease is not the extension's own table/g), 3,
	'every call is refused, not only the first');
$node->safe_psql('postgres', 'ALTER EXTENSION fencelock ADD TABLE fencelock.lease');
is($node->safe_psql('postgres', q{SELECT fencelock.acquire('x', 'o', '1 hour')}), '1',
	'once the table is the extension\'s again, calls run');

fl_no_crash($node, 'extcheck');
done_testing();
