import { createRequire } from 'node:module';
import type { Pool as UndiciPool } from 'undici';

/*
 * undici's connection pool, loaded without the rest of undici's index: fetch, WebSocket,
 * EventSource, the request API, the proxy and mock agents, the interceptors and the cache stores
 * are 7 MB of memory when undici is loaded alone (2–3 MB of the gateway's RSS after the peer
 * bench), for code the gateway never runs: the transport only calls the pool's `dispatch()` and
 * `close()`. undici publishes no subpath exports; this is the file its own index takes the pool
 * from. The tests that run the gateway in a process of its own (test/support/process.ts) fail if
 * a new undici moves it.
 */
const require = createRequire(import.meta.url);

export const Pool = require('undici/lib/dispatcher/pool.js') as typeof UndiciPool;
export type Pool = UndiciPool;
