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
//
// Connection settings come from PG* environment variables.  Exit status: 0 done, 2 busy,
// 3 lease lost (the watchdog stopped the work), 4 stale fence (a write was refused with FL001).
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Busy, Lease, LeaseLost, StaleFence } from './fencelock.mjs';

const { values: a } = parseArgs({
  options: {
    resource: { type: 'string', default: 'report:daily' },
    name: { type: 'string', default: 'worker' },
    ttl: { type: 'string', default: '30' }, // seconds; renewed every ttl/3
    wait: { type: 'string', default: '0' }, // seconds to wait for the lease
    steps: { type: 'string', default: '5' },
    work: { type: 'string', default: '1' }, // seconds of work after each write
  },
});
const say = (msg) => console.log(`${a.name}: ${msg}`);

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
