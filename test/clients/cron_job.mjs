// fencelock's fencedJob under croner (scripts/test-clients.sh; runs in the project the packed
// fencelock and croner from npm were installed into).
//
//   node cron_job.mjs NAME RESOURCE SECONDS WORK_MS
//
// Schedules the job every second for SECONDS seconds.  Each tick that runs writes step 1 and,
// WORK_MS later (lease.sleep: aborted at the loss), step 2 into report_runs, both with its
// fence; prints "NAME: ran SECOND fence F", "NAME: skipped SECOND", "NAME: started SECOND" and
// "NAME: lost SECOND ... after MS ms aborted" (the signal's abort to the job's end).
// FL_CRON_PLAIN=1: the same job without fencedJob (a made-up fence, no lease), to see the
// checks fail; the suite never sets it.
import { Cron } from 'croner';
import { fencedJob } from 'fencelock';
import pg from 'pg';

const [name, resource, seconds, workMs] = process.argv.slice(2);
const STEP = 'UPDATE report_runs SET step = $1, written_by = $2, last_fence = $3 WHERE resource = $4';
const second = () => Math.floor(Date.now() / 1000);

async function job(lease) {
  const s = second();
  console.log(`${name}: started ${s}`);
  let aborted = null;
  lease.signal.addEventListener('abort', () => { aborted = performance.now(); });
  try {
    await lease.query(STEP, [1, name, lease.fence, resource]);
    await lease.sleep(Number(workMs));
    await lease.query(STEP, [2, name, lease.fence, resource]);
  } catch (err) {
    const ms = aborted === null ? 'never' : (performance.now() - aborted).toFixed(0);
    console.log(`${name}: lost ${s} ${err.name}: ${err.message}; ${ms} ms after the signal aborted`);
    throw err;
  }
  console.log(`${name}: ran ${s} fence ${lease.fence}`);
}

let run;
if (process.env.FL_CRON_PLAIN) {
  run = async () => { // no lease: every instance runs every tick
    const client = new pg.Client();
    await client.connect();
    const fence = BigInt(Date.now()) * 1000n + BigInt(process.pid % 1000);
    try {
      await job({ fence, signal: new AbortController().signal, query: (t, v) => client.query(t, v),
        sleep: (ms) => new Promise((r) => setTimeout(r, ms)) });
    } finally {
      await client.end();
    }
  };
} else {
  run = fencedJob(resource, job, {
    ttl: 3,
    onBusy: () => console.log(`${name}: skipped ${second()}`),
    onError: (err) => console.log(`${name}: job failed: ${err.name}`),
  });
}

const cron = new Cron('* * * * * *', { protect: true }, () => run());
setTimeout(() => cron.stop(), Number(seconds) * 1000);
