-- A value on the lease (issue 27): acquire(..., value => jsonb) and set_value, shown in leases
-- while the grant it belongs to is held; a value belongs to one grant (its fence).
\set VERBOSITY terse
-- Fences below start at 1: no lease row, purge floor or value left by earlier tests.
TRUNCATE fencelock.lease, fencelock.fence_floor, fencelock.lease_value;

-- An acquire without a value writes none.
SELECT fencelock.acquire('value:plain', 'o', '30 seconds') AS plain_fence;
SELECT count(*) AS values_written FROM fencelock.lease_value;

-- The leader's address, readable by everyone who reads leases.
SELECT fencelock.acquire('value:leader', 'node-a', '30 seconds',
                         value => '{"addr": "10.0.0.1:5432"}') AS fence_a;
SELECT fence, state, value FROM fencelock.leases WHERE resource = 'value:leader';
-- The same owner's retry keeps its fence and the value; a retry with a value replaces it; a
-- renew keeps it.
SELECT fencelock.acquire('value:leader', 'node-a', '30 seconds') AS retry_fence;
SELECT value FROM fencelock.leases WHERE resource = 'value:leader';
SELECT fencelock.acquire('value:leader', 'node-a', '30 seconds',
                         value => '{"addr": "10.0.0.1:6432"}') AS retry_with_value;
SELECT fencelock.renew('value:leader', 'node-a', '30 seconds') AS renewed;
SELECT value FROM fencelock.leases WHERE resource = 'value:leader';

-- set_value: only the holder of the live lease; NULL clears.
SELECT fencelock.set_value('value:leader', 'node-a', '{"addr": "10.0.0.1:5432", "epoch": 2}') AS holder_sets;
SELECT fencelock.set_value('value:leader', 'node-b', '{"addr": "evil"}') AS other_owner_sets;
SELECT fencelock.set_value('value:free', 'node-a', '1') AS no_lease_sets;
SELECT value FROM fencelock.leases WHERE resource = 'value:leader';
SELECT fencelock.set_value('value:leader', 'node-a', NULL) AS cleared;
SELECT value FROM fencelock.leases WHERE resource = 'value:leader';
SELECT fencelock.set_value('value:leader', 'node-a', '"again"') AS set_again;

-- A release hides the value and purge deletes it; the next grant starts without one.
SELECT fencelock.release('value:leader', 'node-a') AS released;
SELECT state, value FROM fencelock.leases WHERE resource = 'value:leader';
SELECT fencelock.purge('1 day') AS purged_leases;
SELECT count(*) AS values_left FROM fencelock.lease_value;
SELECT fencelock.acquire('value:leader', 'node-b', '30 seconds') AS fence_b;
SELECT fence, value FROM fencelock.leases WHERE resource = 'value:leader';

-- A paused holder: its lease expires, the successor takes over with a value of its own; the old
-- holder can no longer set one, and its old value never shows under the new grant.
SELECT fencelock.acquire('value:job', 'w1', '100 milliseconds', value => '{"progress": 10}') AS job_w1;
SELECT pg_sleep(0.2);
SELECT state, value FROM fencelock.leases WHERE resource = 'value:job';
SELECT fencelock.acquire('value:job', 'w2', '30 seconds') AS job_w2;
SELECT value IS NULL AS no_value_inherited FROM fencelock.leases WHERE resource = 'value:job';
SELECT fencelock.set_value('value:job', 'w1', '{"progress": 99}') AS stale_sets;
SELECT fencelock.set_value('value:job', 'w2', '{"progress": 0}') AS successor_sets;
SELECT value FROM fencelock.leases WHERE resource = 'value:job';
-- A revoke hides it too.
SELECT fencelock.revoke('value:job') AS revoke_fence;
SELECT state, value FROM fencelock.leases WHERE resource = 'value:job';

-- The waiting and session-bound forms take a value as well; a grant rolled back leaves none.
SELECT fencelock.acquire('value:w', 'o', '30 seconds', wait => '1 second', value => '"waited"') AS waited;
SELECT fencelock.acquire('value:s', 'o', '30 seconds', session => true, value => '"bound"') AS bound;
BEGIN;
SELECT fencelock.acquire('value:rb', 'o', '30 seconds', value => '"rolled back"') AS rolled_back;
ROLLBACK;
SELECT resource, value FROM fencelock.leases WHERE resource IN ('value:w', 'value:s', 'value:rb')
 ORDER BY resource;
SELECT resource, fence FROM fencelock.lease_value ORDER BY resource;

-- Nobody but the extension reads or writes the table; the value's argument is checked like the
-- others.
SELECT has_table_privilege('public', 'fencelock.lease_value', 'SELECT') AS public_reads_table;
SELECT fencelock.set_value(NULL, 'o', '1');
SELECT fencelock.set_value('value:w', '', '1');
SELECT fencelock.release('value:w', 'o'), fencelock.release('value:s', 'o'),
       fencelock.release('value:plain', 'o'), fencelock.release('value:leader', 'node-b');
SELECT fencelock.purge('0') >= 0 AS purged;
SELECT count(*) AS values_at_end FROM fencelock.lease_value;
