#!/usr/bin/env node
// A lease holder for the fault scenarios (doc/clients.md, "The lease holder program"):
//
//   node lease-holder.mjs --resource fault:node:s1 --owner node-s1 --ttl 3 --hold 12
//
// Holds RESOURCE as OWNER through withLease (connecting with application_name = OWNER and the
// PG* variables), waiting --hold seconds in lease.sleep while the library renews.  Prints
// "acquired R with fence N at EPOCH_MS", then "lost at EPOCH_MS: TYPE: MESSAGE" (exit 3) or
// "held; released: true|false" (exit 0); "busy" (exit 2).
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { Busy, withLease } from 'fencelock';

const { values: a } = parseArgs({
  options: {
    resource: { type: 'string' },
    owner: { type: 'string' },
    ttl: { type: 'string', default: '3' },
    wait: { type: 'string', default: '0' },
    hold: { type: 'string', default: '10' },
  },
});
const sayLost = (err) => console.log(`lost at ${Date.now()}: ${err?.name ?? typeof err}: ${String(err?.message ?? err).split('\n')[0]}`);

let held = null;
let got = null;
try {
  await withLease({ resource: a.resource, owner: a.owner, ttl: Number(a.ttl), wait: Number(a.wait),
    config: { application_name: a.owner } }, async (lease) => {
    held = lease;
    console.log(`acquired ${a.resource} with fence ${lease.fence} at ${Date.now()}`);
    const end = performance.now() + Number(a.hold) * 1000;
    try {
      for (let left; (left = end - performance.now()) > 0;) await lease.sleep(Math.min(left, 100));
    } catch (err) {
      got = err; // what the work got (LeaseLost by the contract), and when
      sayLost(err);
      throw err;
    }
  });
} catch (err) {
  if (err instanceof Busy) {
    console.log('busy');
    process.exit(2);
  }
  if (held === null || (got === null && err?.name === 'LeaseLost')) {
    sayLost(err); // the acquire failed, or the lease's promise rejected before the work saw it
  } else if (got !== null && err !== got && err?.name !== 'LeaseLost') {
    console.log(`replaced by ${err?.name}: ${err?.message}`); // the release replaced the loss
    process.exit(1);
  }
  process.exit(3);
}
console.log(`held; released: ${held.released}`);
process.exit(0);
