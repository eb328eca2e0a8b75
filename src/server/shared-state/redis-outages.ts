import { performance } from 'node:perf_hooks';
import { ReplyError } from 'ioredis';
import type { Logger } from 'pino';
import type { GatewayMetrics } from '../instruments/metrics.js';

/** What a process keeps in Redis when REDIS_URL is set. */
export type SharedStore = 'limits' | 'apq' | 'response_cache' | 'events';

/** `gateway_shared_state_fallbacks_total{reason}`: no answer in time, or a refusal (`maxmemory`, a replica, other). */
export type FallbackReason = 'unreachable' | 'out_of_memory' | 'read_only' | 'error';

/** After a command failed on a live connection: rather than each request wait out the command timeout. */
const QUIET_AFTER_TIMEOUT_MS = 1_000;

/** A warning about Redis at most this often: a refusal lasts as long as Redis stays full. */
const WARN_EVERY_MS = 60_000;

/** A refusal is Redis's answer (its message starts with its code); anything else is no answer. */
function fallbackReason(error: unknown): FallbackReason {
  if (!(error instanceof ReplyError)) return 'unreachable';
  const code = /^[A-Z]+/.exec((error as Error).message)?.[0];
  return code === 'OOM' ? 'out_of_memory' : code === 'READONLY' ? 'read_only' : 'error';
}

const meanwhile =
  "rate limits count per process, APQ registrations stay in process memory, the response cache misses and a write's eviction from it waits";
const warnings: Record<FallbackReason, string> = {
  unreachable: `Redis unreachable: ${meanwhile} until it is back`,
  out_of_memory: `Redis refuses writes (maxmemory reached): ${meanwhile} meanwhile`,
  read_only: `Redis refuses writes (a read-only replica): ${meanwhile} meanwhile`,
  error: `Redis refused a command: ${meanwhile} meanwhile`,
};

/** Warnings name no address (the URL may carry a password) and quote nothing Redis said beyond its error's code. */
export class RedisOutages {
  #down = false;
  #quietUntil = 0;
  #lastWarning = -Infinity;

  constructor(
    private readonly logger: Logger,
    private readonly metrics: Pick<GatewayMetrics, 'sharedStateFallbacks'>,
  ) {}

  quiet(): boolean {
    return performance.now() < this.#quietUntil;
  }

  /** A failed command and the connection's own events may both tell of one outage. */
  lost(error?: { code?: unknown }): void {
    if (this.#down) return;
    this.#down = true;
    this.#warn('unreachable', typeof error?.code === 'string' ? { code: error.code } : {});
  }

  back(): void {
    if (this.#down)
      this.logger.info('Redis reachable again: rate limits, APQ registrations and the response cache are shared again');
    this.#down = false;
    // A new connection (or node): what timed out on the old one says nothing of it.
    this.#quietUntil = 0;
  }

  /** `error`: the command's failure, none when it was not sent. */
  fellBack(store: SharedStore, error: unknown, live: boolean): void {
    const reason = fallbackReason(error);
    this.metrics.sharedStateFallbacks.inc({ store, reason });
    if (error !== undefined && reason === 'unreachable' && live)
      this.#quietUntil = performance.now() + QUIET_AFTER_TIMEOUT_MS;
    // A refusal, or a command that failed on a live connection (a timeout): the events do not tell.
    this.#warn(reason, { store });
  }

  #warn(reason: FallbackReason, fields: { code?: string; store?: SharedStore }): void {
    if (Date.now() - this.#lastWarning < WARN_EVERY_MS) return;
    this.#lastWarning = Date.now();
    this.logger.warn({ reason, ...fields }, warnings[reason]);
  }
}
