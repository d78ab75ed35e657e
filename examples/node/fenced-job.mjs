#!/usr/bin/env node
// A fenced job: one worker at a time runs it; a paused worker's late writes are refused.
// The table and the exit statuses are those of examples/python/fenced_job.py:
//
//   CREATE TABLE report_runs (resource text PRIMARY KEY, step integer, written_by text,
//                             last_fence bigint);
//   CREATE TRIGGER fence BEFORE UPDATE ON report_runs FOR EACH ROW
//       EXECUTE FUNCTION fencelock.fence_trigger('last_fence');
//   INSERT INTO report_runs (resource) VALUES ('report:daily');
//
//   node fenced-job.mjs --name worker-a --ttl 30 --steps 5 --work 2
//   node fenced-job.mjs --name worker-a --ttl 30 --steps 1 --one-step
//
// --one-step runs the job as fencedStep (one transaction, no watchdog), with --hold-file and
// --fail-at as in examples/python/fenced_job.py; exit 5 when the job failed (nothing committed).
//
// Connection settings come from PG* environment variables.  Exit status: 0 done, 2 busy,
// 3 lease lost (the watchdog stopped the work), 4 stale fence (a write was refused with FL001).
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { existsSync } from 'node:fs';
import { setTimeout as pause } from 'node:timers/promises';
import { Busy, fencedStep, Lease, LeaseLost, StaleFence } from 'fencelock';

const { values: a } = parseArgs({
  options: {
    resource: { type: 'string', default: 'report:daily' },
    name: { type: 'string', default: 'worker' },
    ttl: { type: 'string', default: '30' }, // seconds; renewed every ttl/3
    wait: { type: 'string', default: '0' }, // seconds to wait for the lease
    steps: { type: 'string', default: '5' },
    work: { type: 'string', default: '1' }, // seconds of work after each write
    'one-step': { type: 'boolean', default: false }, // one transaction, no watchdog
    'hold-file': { type: 'string' }, // --one-step: before committing, wait until this exists
    'fail-at': { type: 'string', default: '0' }, // --one-step: fail after this step
  },
});
const say = (msg) => console.log(`${a.name}: ${msg}`);

class JobFailed extends Error {}
if (a['one-step']) {
  let status = 0;
  let outcome = 'done; released: true';
  try {
    await fencedStep({}, a.resource, async (client, fence) => {
      say(`acquired ${a.resource} with fence ${fence}`);
      for (let step = 1; step <= Number(a.steps); step++) {
        await client.query('UPDATE report_runs SET step = $1, written_by = $2, last_fence = $3 WHERE resource = $4',
          [step, a.name, fence, a.resource]);
        say(`step ${step} written with fence ${fence}`);
        if (step === Number(a['fail-at'])) throw new JobFailed(`failed after step ${step}`);
        await pause(Number(a.work) * 1000); // idle in the transaction: past the TTL the server ends it
      }
      while (a['hold-file'] && !existsSync(a['hold-file'])) await client.query('SELECT pg_catalog.pg_sleep(0.1)');
    }, { ttl: Number(a.ttl), wait: Number(a.wait), owner: `${a.name}:${randomUUID()}` });
  } catch (err) {
    if (err instanceof Busy) [status, outcome] = [2, `busy: ${err.message}`];
    else if (err instanceof LeaseLost) [status, outcome] = [3, `lease lost, nothing committed: ${err.message}`];
    else if (err instanceof StaleFence) [status, outcome] = [4, `stale fence, nothing committed: ${err.message}`];
    else if (err instanceof JobFailed) [status, outcome] = [5, `failed, nothing committed: ${err.message}`];
    else throw err;
  }
  say(outcome);
  process.exit(status);
}

const lease = new Lease({ resource: a.resource, owner: `${a.name}:${randomUUID()}`,
  ttl: Number(a.ttl), wait: Number(a.wait) });
try {
  await lease.acquire();
} catch (err) {
  if (!(err instanceof Busy)) throw err;
  say(`busy: ${err.message}`);
  process.exit(2);
}
say(`acquired ${a.resource} with fence ${lease.fence}`);
let status = 0;
let outcome = 'done';
try {
  for (let step = 1; step <= Number(a.steps); step++) {
    // Every write carries the fence: after a takeover it is refused (StaleFence).
    await lease.query('UPDATE report_runs SET step = $1, written_by = $2, last_fence = $3 WHERE resource = $4',
      [step, a.name, lease.fence, a.resource]);
    say(`step ${step} written with fence ${lease.fence}`);
    await lease.sleep(Number(a.work) * 1000); // the work; rejects at once if the lease is lost
  }
} catch (err) {
  if (err instanceof LeaseLost) [status, outcome] = [3, `lease lost, work stopped: ${err.message}`];
  else if (err instanceof StaleFence) [status, outcome] = [4, `stale fence, stopped: ${err.message}`];
  else throw err;
} finally {
  await lease.release();
}
say(`${outcome}; released: ${lease.released}`);
process.exitCode = status;
