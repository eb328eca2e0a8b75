/** Retry policy of idempotent reads; data normalised once rather than literals in the loop. */
export interface RetryPolicy {
  /** Retries after the first attempt. @default 2 */
  readonly limit: number;
  /** Statuses that say "try again", for GETs only. @default [502, 503, 504] */
  readonly statusCodes: readonly number[];
  /** Connection failures worth a second try: refused, reset, closed under us. */
  readonly errorCodes: readonly string[];
  /** First backoff; doubled per retry, then jittered by ±50 %. @default 25 */
  readonly baseDelayMs: number;
  /** Upper bound of one backoff. @default 250 */
  readonly maxDelayMs: number;
}

export const defaultRetryPolicy: RetryPolicy = Object.freeze({
  limit: 2,
  statusCodes: [502, 503, 504],
  errorCodes: ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED'],
  baseDelayMs: 25,
  maxDelayMs: 250,
});

/** The pause after failed attempt `attempt` (0 for the first): doubled per retry up to the cap, then ±50 % at random. */
export function backoffMs(policy: RetryPolicy, attempt: number): number {
  return Math.min(policy.baseDelayMs * 2 ** attempt, policy.maxDelayMs) * (0.5 + Math.random());
}
