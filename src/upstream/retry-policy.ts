import { ExponentialBackoff, handleWhenResult, type RetryPolicy, retry } from 'cockatiel';
import { Failure } from './failures.js';

/** Which failures of idempotent reads are tried again, and after what pause; data rather than literals in the loop. */
export interface RetryRules {
  /** Retries after the first attempt. @default 2 */
  readonly limit: number;
  /** Statuses that say "try again", for GETs only. @default [502, 503, 504] */
  readonly statusCodes: readonly number[];
  /** Connection failures worth a second try: refused, reset, closed under us. */
  readonly errorCodes: readonly string[];
  /** Scale of the first pause; it grows about twofold per retry, with decorrelated jitter. @default 25 */
  readonly baseDelayMs: number;
  /** Upper bound of one pause. @default 250 */
  readonly maxDelayMs: number;
}

export const defaultRetryRules: RetryRules = Object.freeze({
  limit: 2,
  statusCodes: [502, 503, 504],
  errorCodes: ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED'],
  baseDelayMs: 25,
  maxDelayMs: 250,
});

/**
 * cockatiel's retry loop over a call's attempts: it tries again while an attempt returns a
 * retryable Failure, up to `limit` times, pausing with exponential backoff and decorrelated jitter
 * (cockatiel's default generator). Whether a Failure is retryable is the transport's decision
 * (a GET, a retryable status or error, the retry budget, a closed breaker): an attempt that must
 * not be tried again returns `Failure.final()`. Attempts return their failures rather than throw
 * them, so the policy allocates no error per attempt and never wraps one.
 */
export function retryPolicyOf(rules: RetryRules): RetryPolicy {
  return retry(
    handleWhenResult((outcome) => outcome instanceof Failure && outcome.retryable),
    {
      maxAttempts: rules.limit,
      backoff: new ExponentialBackoff({ initialDelay: rules.baseDelayMs, maxDelay: rules.maxDelayMs }),
    },
  );
}
