// fencelock from Node (pg): a lease with a watchdog, and typed fencing errors.
//
//   await withLease({ resource: 'report:daily', ttl: 30 }, async (lease) => {
//     for (const part of parts) {
//       await lease.query('UPDATE reports SET done = done + 1, last_fence = $1 WHERE id = 1',
//                         [lease.fence]);       // rejects with StaleFence (FL001) after a takeover
//       await work(part, { signal: lease.signal });   // aborted when the watchdog loses the lease
//     }
//   });
//
// The lease is taken first (Busy when another owner holds it) and renewed every ttl/3 by a
// watchdog on its own connection; when a renewal fails or finds the lease gone, lease.signal is
// aborted with a LeaseLost reason and the statement the work is running is cancelled.  The lease
// is released at the end.  Errors of the fencelock API come back as the classes below.
//
// A one-step job (take the lock, write rows carrying the fence, release) needs no watchdog:
// fencedStep runs it as one transaction on one connection.
//
//   const total = await fencedStep({}, 'report:daily', async (client, fence) => (await client.query(
//     'UPDATE reports SET total = total + 1, last_fence = $1 WHERE id = 1 RETURNING total',
//     [fence])).rows[0].total, { ttl: 30 });
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import pRetry from 'p-retry';

export class FencelockError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}
/** FL001: a newer holder exists. Roll back and stop; never retry with the same fence. */
export class StaleFence extends FencelockError {}
/** FL002: the write did not carry a fence (a bug in the caller). */
export class Unfenced extends FencelockError {}
/** acquire returned NULL: another owner holds a live lease. */
export class Busy extends FencelockError {}
/** The watchdog could not renew the lease: stop the work. */
export class LeaseLost extends FencelockError {}

const bySqlstate = { FL001: StaleFence, FL002: Unfenced };

/** FL001/FL002 from pg as StaleFence/Unfenced (the original as cause); anything else as is. */
export function translate(err) {
  const Class = bySqlstate[err?.code];
  return Class ? new Class(err.message, { cause: err }) : err;
}

/** client.query (a Client or a Pool) with fencelock's errors translated. */
export async function query(client, text, values) {
  try {
    return await client.query(text, values);
  } catch (err) {
    throw translate(err);
  }
}

// Worth retrying within one renewal: the connection broke or the server is restarting.
const transient = (err) =>
  /^(08|57P0)/.test(err.code ?? '') || ['ECONNRESET', 'ECONNREFUSED', 'EPIPE'].includes(err.code) ||
  /Connection terminated/.test(err.message);

export class Lease {
  #ctl = new AbortController();
  #stop = new AbortController();
  #watchdog;

  /** ttl and wait in seconds; connection settings from PG* variables unless config says. */
  constructor({ resource, owner, ttl = 30, wait = 0, config = {} }) {
    Object.assign(this, { resource, ttl, wait, config, fence: null, released: null });
    this.owner = owner ?? `${resource}:${randomUUID()}`; // unguessable: it renews and releases
    this.signal = this.#ctl.signal;
  }

  async acquire() {
    // The watchdog's own connection: a pool of one replaces it when it breaks.
    this.wd = new pg.Pool({ ...this.config, max: 1 });
    this.client = new pg.Client(this.config); // the work's
    try {
      await this.client.connect();
      const { rows } = await this.wd.query(
        'SELECT fencelock.acquire($1, $2, make_interval(secs => $3), make_interval(secs => $4)) AS f',
        [this.resource, this.owner, this.ttl, this.wait]);
      if (rows[0].f === null) throw new Busy(`${this.resource} is held by another owner`);
      this.fence = BigInt(rows[0].f); // int8 arrives as a string
    } catch (err) {
      await this.#close();
      throw err;
    }
    this.#watchdog = this.#watch();
    return this;
  }

  async #watch() {
    // Renew and release name their grant (the fence): a retry cannot touch a newer lease.
    const renew = () => this.wd.query(
      'SELECT fencelock.renew($1, $2, make_interval(secs => $3), $4::int8) AS ok',
      [this.resource, this.owner, this.ttl, this.fence.toString()]);
    for (;;) {
      try {
        await sleep(this.ttl * 1000 / 3, undefined, { signal: this.#stop.signal });
      } catch {
        return; // released
      }
      let why = 'the lease expired or was taken over';
      try {
        const { rows } = await pRetry(renew, { retries: 2, minTimeout: 50, shouldRetry: transient });
        if (rows[0].ok) continue;
      } catch (err) {
        why = `renewal failed: ${err.message}`;
      }
      this.#ctl.abort(new LeaseLost(why));
      // Cancel the statement the work is running, if any (same role: allowed).
      await this.wd.query('SELECT pg_cancel_backend($1)', [this.client.processID]).catch(() => {});
      return;
    }
  }

  /** Run a statement on the work's connection; carry lease.fence in every fenced write. */
  async query(text, values) {
    this.signal.throwIfAborted();
    try {
      return await this.client.query(text, values);
    } catch (err) {
      this.signal.throwIfAborted(); // cancelled by the watchdog: LeaseLost
      throw translate(err);
    }
  }

  /** Wait (pacing, or work elsewhere), rejecting with LeaseLost as soon as the lease is lost. */
  async sleep(ms) {
    try {
      await sleep(ms, undefined, { signal: this.signal });
    } catch (err) {
      this.signal.throwIfAborted();
      throw err;
    }
  }

  async release() {
    this.#stop.abort();
    await this.#watchdog;
    try {
      const { rows } = await this.wd.query('SELECT fencelock.release($1, $2, $3::int8) AS ok',
        [this.resource, this.owner, this.fence.toString()]);
      this.released = rows[0].ok;
    } finally {
      await this.#close();
    }
    return this.released;
  }

  async #close() {
    await Promise.allSettled([this.client.end(), this.wd.end()]);
  }
}

/** Hold the lease while work(lease) runs; release it however the work ends. */
export async function withLease(options, work) {
  const lease = await new Lease(options).acquire();
  try {
    return await work(lease);
  } finally {
    await lease.release();
  }
}

/**
 * Take the lease, run fn(client, fence), release: one transaction on one connection.
 *
 * BEGIN; SET LOCAL idle_in_transaction_session_timeout = ttl; acquire; fn's writes (carry the
 * fence, a BigInt); release and COMMIT in one round trip.  The open transaction keeps the grant's
 * row locked, so no other owner gets the lease before it ends (a try-once acquire answers NULL, a
 * waiting one waits), also past the TTL; grant, writes and release commit or vanish together.  A
 * step idle in its transaction for longer than ttl seconds (a paused process) is ended by the
 * server: its writes roll back, the lease is free again, and the step rejects with LeaseLost.
 * Busy when another owner holds the lease (after wait seconds); FL001/FL002 as
 * StaleFence/Unfenced; on any error the transaction is rolled back.  Resolves to fn's result.
 *
 * clientOrConfig: a connected pg.Client outside a transaction, or a config for a Client that is
 * opened and closed here (PG* variables otherwise).  fn must not commit or roll back.
 */
export async function fencedStep(clientOrConfig, resource, fn, { ttl = 30, wait = 0, owner } = {}) {
  const own = !(clientOrConfig instanceof pg.Client);
  const client = own ? new pg.Client(clientOrConfig) : clientOrConfig;
  owner ??= `${resource}:${randomUUID()}`;
  let lost = null;
  const onError = (err) => { lost ??= err; }; // the server ended the session
  client.on('error', onError);
  let committing = false;
  try {
    if (own) await client.connect();
    const secs = (s) => { // a number, to go into the query's text
      if (!Number.isFinite(Number(s)) || Number(s) < 0) throw new TypeError(`not seconds: ${s}`);
      return Number(s);
    };
    // BEGIN (READ COMMITTED unless the session says otherwise) and the acquire in one round trip:
    // one simple query of two statements.  The timeout only counts while the session is idle in
    // the transaction, so it can be set in the acquire's statement.
    const [, { rows }] = await client.query('BEGIN; ' +
      "SELECT pg_catalog.set_config('idle_in_transaction_session_timeout', " +
      `'${Math.max(1, Math.round(secs(ttl) * 1000))}', true), ` +
      `fencelock.acquire(${client.escapeLiteral(resource)}, ${client.escapeLiteral(owner)}, ` +
      `make_interval(secs => ${secs(ttl)}), make_interval(secs => ${secs(wait)})) AS f`);
    if (rows[0].f === null) throw new Busy(`${resource} is held by another owner`);
    const fence = BigInt(rows[0].f);
    const result = await fn(client, fence);
    committing = true;
    // The release and the COMMIT in one round trip: one simple query of two statements.
    await client.query(`SELECT fencelock.release(${client.escapeLiteral(resource)}, ` +
      `${client.escapeLiteral(owner)}, ${fence}::int8); COMMIT`);
    return result;
  } catch (err) {
    if (lost && !committing) {
      throw new LeaseLost(`the session ended before the step committed: ${lost.message}`, { cause: err });
    }
    if (!lost) await client.query('ROLLBACK').catch(() => {});
    throw translate(err);
  } finally {
    client.off('error', onError);
    if (own) await client.end().catch(() => {});
  }
}
