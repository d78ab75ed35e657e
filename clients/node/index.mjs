// fencelock from Node (pg): leases that report their loss in time, and typed fencing errors.
//
//   await withLease({ resource: 'report:daily', ttl: 30 }, async (lease) => {
//     for (const part of parts) {
//       await lease.query('UPDATE reports SET done = done + 1, last_fence = $1 WHERE id = 1',
//                         [lease.fence]);       // rejects with StaleFence (FL001) after a takeover
//       await work(part, { signal: lease.signal });   // aborted when the lease is lost
//     }
//   });
//
// The lease contract (doc/clients.md): the lease is lost no later than its local deadline, the
// moment the grant or the last successful renewal was sent plus the ttl (performance.now, a
// monotonic clock); every renewal is bounded by what remains; a broken connection is reopened
// and the lease renewed there, naming its fence, while the deadline allows; the loss aborts
// lease.signal and rejects lease.lost (and withLease's promise); a failing release never
// replaces it; no connection error is ever an unhandled 'error' event.  One owner token per
// Lease, reused by its retries: an acquire whose reply was lost gets the same fence.
//
// A one-step job (take the lock, write rows carrying the fence, end) needs no renewals:
// fencedStep runs it as one transaction on acquire_xact.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

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
/** The lease is lost (refused, or not renewed before its deadline): stop the work. */
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

// A server's answer (other than "the session is ending") is not a broken connection.
const broken = (err) => !(err instanceof pg.DatabaseError) || /^(08|57P0)/.test(err.code ?? '');
const TIMEOUT = Symbol('timeout');
const now = () => performance.now();

/** Break a client's socket at once: whatever waits on it rejects; never waits for the peer. */
function destroy(client) {
  if (!client) return;
  try {
    client.connection?.stream?.destroy();
  } catch {
    // already gone
  }
}

/** fn() or TIMEOUT after ms (then onTimeout()). */
async function bounded(ms, fn, onTimeout) {
  let timer;
  const expiry = new Promise((resolve) => { timer = setTimeout(resolve, Math.max(0, ms), TIMEOUT); });
  const call = fn();
  call.catch(() => {}); // settled after the timeout: nobody waits for it any more
  try {
    const r = await Promise.race([call, expiry]);
    if (r === TIMEOUT) {
      onTimeout();
      throw TIMEOUT;
    }
    return r;
  } finally {
    clearTimeout(timer);
  }
}

export class Lease {
  #ctl = new AbortController();
  #stop = new AbortController();
  #watchdog = null;
  #deadline = 0; // performance.now(): when the lease may have expired on the server
  #wd = null; // the watchdog's connection
  #reject;

  /** ttl, wait and margin in seconds; connection settings from PG* variables unless config says. */
  constructor({ resource, owner, ttl = 30, wait = 0, margin, config = {} }) {
    Object.assign(this, { resource, ttl, wait, config, fence: null, released: null, client: null });
    this.owner = owner ?? `${resource}:${randomUUID()}`; // unguessable: it renews and releases
    this.margin = margin ?? Math.min(0.25, ttl / 10);
    this.signal = this.#ctl.signal;
    this.lost = new Promise((resolve, reject) => { this.#reject = reject; });
    this.lost.catch(() => {}); // rejecting it is never an unhandled rejection
  }

  // -- connections --------------------------------------------------------------------------------
  /** The server's statement_timeout for a renewal: what remains at a regular renewal. */
  #renewalMs() {
    return Math.max(1, Math.round((this.ttl * 2 / 3 - this.margin) * 1000));
  }

  async #connect(timeoutMs, statementMs = this.#renewalMs()) {
    const c = new pg.Client({
      ...this.config,
      connectionTimeoutMillis: Math.max(1, Math.ceil(timeoutMs)),
      statement_timeout: statementMs,
    });
    c.on('error', () => destroy(c)); // a restart, a terminated backend: the next call reconnects
    try {
      await c.connect();
    } catch (err) {
      destroy(c);
      throw err;
    }
    return c;
  }

  async #watchdogConn(timeoutMs, statementMs) {
    if (this.#wd && !this.#wd.connection?.stream?.destroyed) return this.#wd;
    this.#dropWatchdogConn();
    const c = await this.#connect(timeoutMs, statementMs);
    if (this.signal.aborted || this.#stop.signal.aborted) { // an abandoned reconnect, late
      destroy(c);
      throw new LeaseLost('the lease ended');
    }
    this.#wd = c;
    return c;
  }

  #dropWatchdogConn() {
    destroy(this.#wd);
    this.#wd = null;
  }

  // -- acquire, renew, release ----------------------------------------------------------------------
  /**
   * Take the lease (Busy when another owner holds it) and start renewing it.  A connection lost
   * before the reply is reopened and the acquire retried with the same owner token, which gets
   * the same fence, for up to wait + ttl seconds.
   */
  async acquire() {
    const giveUp = now() + (this.wait + this.ttl) * 1000;
    let sent;
    let rows;
    for (;;) {
      sent = now();
      try {
        // No statement_timeout for the acquire: it may wait (the wait is its bound).
        ({ rows } = await bounded(giveUp - sent, async () => (await this.#watchdogConn(giveUp - sent, 0)).query(
          'SELECT fencelock.acquire($1, $2, make_interval(secs => $3), make_interval(secs => $4)) AS f',
          [this.resource, this.owner, this.ttl, this.wait]), () => this.#dropWatchdogConn()));
        break;
      } catch (err) {
        this.#dropWatchdogConn();
        if (err !== TIMEOUT && !broken(err)) throw err;
        if (now() + 200 >= giveUp) {
          throw err === TIMEOUT ? new FencelockError(`no reply to the acquire of ${this.resource}`) : err;
        }
        await sleep(200);
      }
    }
    if (rows[0].f === null) {
      this.#dropWatchdogConn();
      throw new Busy(`${this.resource} is held by another owner`);
    }
    this.fence = BigInt(rows[0].f); // int8 arrives as a string
    this.#deadline = sent + this.ttl * 1000;
    // The renewals that follow on this connection (a failure: the first renewal reconnects).
    await bounded(this.#deadline - this.margin * 1000 - now(),
      () => this.#wd.query(`SET statement_timeout = ${this.#renewalMs()}`), () => this.#dropWatchdogConn())
      .catch(() => this.#dropWatchdogConn());
    if (now() - sent > this.ttl * 1000 / 3) sent = await this.#pin();
    this.#watchdog = this.#watch(sent);
    return this;
  }

  // After a grant that came late (a wait, a slow reply), renew at once: the deadline its request
  // gives may be (nearly) spent, while the grant itself may be recent.  Resolves to when the
  // renewal was sent; LeaseLost (the lease released) when it fails.
  async #pin() {
    const sent = now();
    const bound = (this.ttl - this.margin) * 1000;
    const ok = await bounded(bound, () => this.#renewOnce(bound), () => this.#dropWatchdogConn())
      .catch(() => false);
    if (!ok) {
      await this.release();
      throw new LeaseLost('granted late, and not renewed at once');
    }
    this.#deadline = sent + this.ttl * 1000;
    return sent;
  }

  async #renewOnce(remaining) {
    const { rows } = await (await this.#watchdogConn(remaining)).query(
      'SELECT fencelock.renew($1, $2, make_interval(secs => $3), $4::int8) AS ok',
      [this.resource, this.owner, this.ttl, this.fence.toString()]);
    return rows[0].ok;
  }

  async #watch(sent) {
    let next = sent + this.ttl * 1000 / 3;
    for (;;) {
      try {
        await sleep(Math.max(0, next - now()), undefined, { signal: this.#stop.signal });
      } catch {
        return; // released
      }
      let lastError = null;
      for (;;) {
        const remaining = this.#deadline - this.margin * 1000 - now();
        if (remaining <= 0) {
          return this.#lose(`not renewed before its deadline${lastError ? ` (${lastError.message})` : ''}`);
        }
        const t = now();
        let ok;
        try {
          ok = await bounded(remaining, () => this.#renewOnce(remaining), () => this.#dropWatchdogConn());
        } catch (err) {
          if (err === TIMEOUT) return this.#lose("no reply to the renewal before the lease's deadline");
          if (err instanceof LeaseLost) return undefined;
          lastError = err; // the connection broke, the server restarts: again, on a new one
          this.#dropWatchdogConn();
          try {
            await sleep(Math.min(200, remaining), undefined, { signal: this.#stop.signal });
          } catch {
            return undefined;
          }
          continue;
        }
        if (!ok) return this.#lose('the lease expired or was taken over');
        this.#deadline = t + this.ttl * 1000;
        next = t + this.ttl * 1000 / 3;
        break;
      }
    }
  }

  #lose(why) {
    const err = new LeaseLost(why);
    this.#ctl.abort(err);
    this.#reject(err);
    destroy(this.client); // the statement the work is running, if any, rejects at once
  }

  /**
   * Stop renewing and release; resolves to released (false when the lease was no longer held
   * or the release could not be done).  Never rejects: the work's error stays the one.
   */
  async release() {
    this.#stop.abort();
    await this.#watchdog;
    // A lease lost by its deadline may be unreachable: one short try, then released: false.
    const budget = this.signal.aborted ? 1000 : Math.max(1000, Math.min(5000, this.ttl * 1000));
    try {
      const { rows } = await bounded(budget, async () => {
        if (!this.#wd || this.#wd.connection?.stream?.destroyed) this.#wd = await this.#connect(budget);
        return this.#wd.query('SELECT fencelock.release($1, $2, $3::int8) AS ok',
          [this.resource, this.owner, this.fence.toString()]);
      }, () => this.#dropWatchdogConn());
      this.released = rows[0].ok;
    } catch {
      this.released = false;
    } finally {
      await Promise.allSettled([this.#wd, this.client].map((c) => c && bounded(500, () => c.end(), () => destroy(c))));
      this.#wd = null;
      this.client = null;
    }
    return this.released;
  }

  // -- the work's side ------------------------------------------------------------------------------
  /**
   * Run a statement on the work's connection (opened on first use, reopened when it broke);
   * carry lease.fence in every fenced write.  Rejects with LeaseLost once the lease is lost,
   * also when the loss interrupted this statement.
   */
  async query(text, values) {
    this.signal.throwIfAborted();
    try {
      if (!this.client || this.client.connection?.stream?.destroyed) {
        destroy(this.client);
        this.client = await this.#connect(10000);
      }
      return await this.client.query(text, values);
    } catch (err) {
      this.signal.throwIfAborted(); // interrupted by the loss: LeaseLost
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
}

/**
 * Hold the lease while work(lease) runs; release it however the work ends.  Rejects with
 * LeaseLost as soon as the lease is lost (lease.signal is aborted for the work to stop), and
 * with the work's error otherwise; the release never replaces either.
 */
export async function withLease(options, work) {
  const lease = await new Lease(options).acquire();
  const running = work(lease);
  running.catch(() => {}); // it may settle after a loss was reported
  try {
    return await Promise.race([running, lease.lost]);
  } finally {
    await lease.release();
  }
}

/**
 * A scheduler's job that runs only while it holds the lease: fencedJob(resource, fn, options)
 * returns the function to hand to croner, node-cron or setInterval.  Each call (a tick) takes
 * the lease and runs fn(lease, ...the scheduler's arguments) under withLease: lease.fence for
 * the writes, lease.signal aborted at the loss.  A tick that finds the lease held by another
 * owner (another instance of the service ticking the same job) skips: onBusy(resource), then
 * resolves to undefined; onBusy: 'throw' rejects with Busy instead.  The job's error (LeaseLost
 * at the loss) goes to onError when given (the tick then resolves to undefined: no unhandled
 * rejection in a scheduler that does not await its jobs), and rejects the tick otherwise.
 * resource: a string, or a function of the tick's arguments.  Other options are Lease's.
 */
export function fencedJob(resource, fn, { onBusy, onError, ...options } = {}) {
  return async (...args) => {
    const name = typeof resource === 'function' ? resource(...args) : resource;
    try {
      return await withLease({ ...options, resource: name }, (lease) => fn(lease, ...args));
    } catch (err) {
      if (err instanceof Busy && onBusy !== 'throw') {
        if (typeof onBusy === 'function') onBusy(name);
        return undefined;
      }
      if (!onError) throw err;
      onError(err, name);
      return undefined;
    }
  };
}

/**
 * Take the lease for one transaction (acquire_xact), run fn(client, fence), commit.
 *
 * BEGIN; SET LOCAL idle_in_transaction_session_timeout = ttl; acquire_xact; fn's writes (carry
 * the fence, a BigInt); COMMIT, which ends the lease.  The open transaction keeps the grant from
 * every other owner until it ends (a try-once acquire answers NULL, a waiting one waits); grant
 * and writes commit or vanish together.  A step idle in its transaction for longer than ttl
 * seconds (a paused process) is ended by the server: its writes roll back and the step rejects
 * with LeaseLost.  Busy when another owner holds the lease (after wait seconds); FL001/FL002 as
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
    // BEGIN (READ COMMITTED unless the session says otherwise) and the grant in one round trip:
    // one simple query of two statements.  The timeout only counts while the session is idle in
    // the transaction, so it can be set in the grant's statement.
    const [, { rows }] = await client.query('BEGIN; ' +
      "SELECT pg_catalog.set_config('idle_in_transaction_session_timeout', " +
      `'${Math.max(1, Math.round(secs(ttl) * 1000))}', true), ` +
      `fencelock.acquire_xact(${client.escapeLiteral(resource)}, ${client.escapeLiteral(owner)}, ` +
      `make_interval(secs => ${secs(wait)})) AS f`);
    if (rows[0].f === null) throw new Busy(`${resource} is held by another owner`);
    const fence = BigInt(rows[0].f);
    const result = await fn(client, fence);
    committing = true;
    await client.query('COMMIT');
    return result;
  } catch (err) {
    if (lost && !committing) {
      throw new LeaseLost(`the session ended before the step committed: ${lost.message}`, { cause: err });
    }
    if (!lost && !committing) await client.query('ROLLBACK').catch(() => {});
    throw translate(err);
  } finally {
    if (own) {
      await client.end().catch(() => {});
    } else {
      client.off('error', onError); // the caller's client: its error listeners are the caller's
    }
  }
}
