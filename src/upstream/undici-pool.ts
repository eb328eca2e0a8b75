import { createRequire } from 'node:module';
import type { Pool as UndiciPool } from 'undici';

/*
 * undici's connection pool and its request API, loaded without the rest of undici's index: fetch,
 * WebSocket, EventSource, the proxy and mock agents, the interceptors and the cache stores are
 * 7 MB of memory when undici is loaded alone (2–3 MB of the gateway's RSS after the peer bench),
 * for code the gateway never runs. undici publishes no subpath exports; these are the files its
 * own index assembles the two from (`lib/dispatcher/pool.js`, and `lib/api` mixed into
 * `Dispatcher.prototype`). The tests that run the gateway in a process of its own
 * (test/support/process.ts) fail if a new undici moves them.
 */
const require = createRequire(import.meta.url);

export const Pool = require('undici/lib/dispatcher/pool.js') as typeof UndiciPool;
export type Pool = UndiciPool;

// What undici's index does once on load: request(), stream(), pipeline() … on every dispatcher.
// Assigning the same functions again, if the index is loaded too (tests use it), changes nothing.
Object.assign((require('undici/lib/dispatcher/dispatcher.js') as { prototype: object }).prototype, require('undici/lib/api/index.js'));
