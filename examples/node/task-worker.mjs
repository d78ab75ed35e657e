#!/usr/bin/env node
// A task-table worker: claim, heartbeat, checkpoint carrying the fence, complete or fail.
// The table, the options and the output are those of examples/python/task_worker.py (the
// walkthrough table of doc/claim.md; fail() needs a last_error column):
//
//   node task-worker.mjs --table tasks --name worker-a --steps 12 --step-time 1 --exit-when-idle
//
// A write refused with FL001 (StaleFence) means another worker has the job now: the worker drops
// it at once and claims the next.  Ids starting with "bad-" fail at their second step.
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { LeaseLost, StaleFence, query } from 'fencelock';

const { values: a } = parseArgs({
  options: {
    table: { type: 'string', default: 'tasks' },
    name: { type: 'string', default: 'worker' },
    ttl: { type: 'string', default: '30' }, // seconds; heartbeat every ttl/3
    steps: { type: 'string', default: '12' },
    'step-time': { type: 'string', default: '1' },
    'exit-when-idle': { type: 'boolean', default: false },
  },
});
const say = (msg) => console.log(`${a.name}: ${msg}`);
const tbl = a.table.split('.').map(pg.escapeIdentifier).join('.');
const ttl = `${a.ttl} s`;
const pool = new pg.Pool({ max: 2 }); // PG* variables; autocommit unless a client says BEGIN
// An idle connection the server ends (a restart, idle_session_timeout) is an 'error' event of the
// pool: without a listener it would end the process.  The next query opens a new connection.
pool.on('error', () => {});

async function work(job, checkpoint, fence) {
  let step = checkpoint ? Number(checkpoint.split('-')[1]) : 0;
  let beat = Date.now();
  while (step < Number(a.steps)) {
    await sleep(Number(a['step-time']) * 1000); // the work
    step += 1;
    if (job.startsWith('bad-') && step === 2) throw new Error(`cannot process ${job}`);
    await query(pool, `UPDATE ${tbl} SET checkpoint = $1, fence = $2 WHERE id = $3`,
      [`step-${step}`, fence, job]);
    say(`checkpoint step-${step}`);
    if (Date.now() - beat >= a.ttl * 1000 / 3) {
      const { rows } = await query(pool, 'SELECT fencelock.heartbeat($1, $2, $3, $4) AS ok',
        [a.table, job, fence, ttl]);
      if (!rows[0].ok) throw new LeaseLost(`${job} is not running any more`);
      beat = Date.now();
    }
  }
  const client = await pool.connect(); // the result and the completion in one transaction
  try {
    await client.query('BEGIN');
    await query(client, `UPDATE ${tbl} SET result = $1, fence = $2 WHERE id = $3`,
      [`${a.name}'s result`, fence, job]);
    await query(client, 'SELECT fencelock.complete($1, $2, $3)', [a.table, job, fence]);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  } finally {
    client.release();
  }
}

for (;;) {
  // Autocommit: a claim's fence is valid once the claim has committed.
  const { rows } = await query(pool,
    `SELECT id, checkpoint, fence FROM fencelock.claim(NULL::${tbl}, $1, $2)`, [a.name, ttl]);
  if (rows.length === 0) {
    if (a['exit-when-idle']) break;
    await sleep(1000);
    continue;
  }
  const { id: job, checkpoint, fence } = rows[0];
  say(`claimed ${job} with fence ${fence}, checkpoint ${checkpoint}`);
  try {
    await work(job, checkpoint, fence);
    say(`completed ${job}`);
  } catch (err) {
    if (err instanceof StaleFence || err instanceof LeaseLost) {
      say(`dropped ${job}: ${err.name}: ${err.message}`); // taken over: never retry it
      continue;
    }
    const { rows: r } = await query(pool, 'SELECT fencelock.fail($1, $2, $3, $4) AS state',
      [a.table, job, fence, err.message]).catch((e) => { // FL001 here too: taken over
        if (e instanceof StaleFence) return { rows: [{ state: 'taken over' }] };
        throw e;
      });
    say(`failed ${job}: ${err.message}; now ${r[0].state}`);
  }
}
say('no job left');
await pool.end();
