// Types of fencelock for Node (index.mjs).  The contract: doc/clients.md of the fencelock repository.
import type { Client, ClientConfig, Pool, QueryResult, QueryResultRow } from 'pg';

export class FencelockError extends Error {}
/** FL001: a newer holder exists. Roll back and stop; never retry with the same fence. */
export class StaleFence extends FencelockError {}
/** FL002: the write did not carry a fence (a bug in the caller). */
export class Unfenced extends FencelockError {}
/** acquire returned NULL: another owner holds a live lease. */
export class Busy extends FencelockError {}
/** The lease is lost (refused, or not renewed before its deadline): stop the work. */
export class LeaseLost extends FencelockError {}

/** FL001/FL002 from pg as StaleFence/Unfenced (the original as cause); anything else as is. */
export function translate(err: unknown): unknown;
/** client.query with fencelock's errors translated. */
export function query<R extends QueryResultRow = any>(client: Client | Pool, text: string,
  values?: unknown[]): Promise<QueryResult<R>>;

export interface LeaseOptions {
  resource: string;
  /** The owner token (default: the resource and a random UUID); one per Lease. */
  owner?: string;
  /** Seconds (default 30); renewed every ttl/3. */
  ttl?: number;
  /** Seconds to wait for the lease (default 0: try once). */
  wait?: number;
  /** Seconds before the local deadline at which the loss is declared (default min(0.25, ttl/10)). */
  margin?: number;
  /** Given to pg.Client (PG* variables otherwise). */
  config?: ClientConfig;
}

export class Lease {
  constructor(options: LeaseOptions);
  readonly resource: string;
  readonly owner: string;
  readonly ttl: number;
  readonly wait: number;
  readonly margin: number;
  /** The fence, after acquire(). */
  fence: bigint | null;
  /** After release(): true, or false when the lease was no longer held or could not be released. */
  released: boolean | null;
  /** The work's connection, opened by the first query() (reopened when it broke). */
  client: Client | null;
  /** Aborted, with a LeaseLost reason, when the lease is lost. */
  readonly signal: AbortSignal;
  /** Rejects with LeaseLost when the lease is lost; never settles otherwise. */
  readonly lost: Promise<never>;
  /** Takes the lease (Busy when held by another owner) and starts renewing it. */
  acquire(): Promise<this>;
  /** Stops renewing and releases; never rejects. */
  release(): Promise<boolean>;
  /** A statement on the work's connection, errors translated; LeaseLost once the lease is lost. */
  query<R extends QueryResultRow = any>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
  /** Waits ms milliseconds; rejects with LeaseLost as soon as the lease is lost. */
  sleep(ms: number): Promise<void>;
}

/** Holds the lease while work runs; rejects with LeaseLost as soon as the lease is lost. */
export function withLease<T>(options: LeaseOptions, work: (lease: Lease) => Promise<T>): Promise<T>;

export interface JobOptions extends Omit<LeaseOptions, 'resource'> {
  /** 'throw': a tick that finds the lease held rejects with Busy; a function: called, then skip. */
  onBusy?: 'skip' | 'throw' | ((resource: string) => void);
  /** Receives the job's error (LeaseLost at the loss); the tick then resolves to undefined. */
  onError?: (err: Error, resource: string) => void;
}
/** A scheduler's job run only while it holds the lease; a tick that finds it held skips. */
export function fencedJob<A extends unknown[], T>(resource: string | ((...args: A) => string),
  fn: (lease: Lease, ...args: A) => Promise<T>, options?: JobOptions): (...args: A) => Promise<T | undefined>;

export interface StepOptions {
  ttl?: number;
  wait?: number;
  owner?: string;
}
/** The one-step form: acquire_xact, fn's writes and the commit in one transaction. */
export function fencedStep<T>(clientOrConfig: Client | ClientConfig, resource: string,
  fn: (client: Client, fence: bigint) => Promise<T>, options?: StepOptions): Promise<T>;
