import type { Context } from '@opentelemetry/api';
import type { z } from 'zod';
import type { OperationName } from '../domain/operations.js';
import type { CallGuard } from './call-guard.js';
import type { UpstreamErrorCode } from './errors.js';

/* What one upstream call is made of, as operation functions (heads.ts, auth.ts…) and the transport see it. */

/** What the caller of one incoming request brings to every upstream call it makes. */
export interface CallContext {
  /** The incoming `Authorization` header, forwarded verbatim; the gateway has no token of its own. */
  readonly authorization?: string | undefined;
  readonly requestId: string;
  /** Cancels the call: the client went away. (The operation's deadline reaches calls through the guard.) */
  readonly signal?: AbortSignal | undefined;
  readonly guard?: CallGuard | undefined;
  /** The operation's trace: every attempt's span is a child of it. Without one, each attempt starts a trace. */
  readonly trace?: Context | undefined;
}

export interface CallSpec<T> {
  readonly operation: OperationName;
  readonly params?: Readonly<Record<string, string>>;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly json?: object;
  readonly form?: Readonly<Record<string, string>>;
  /** Schema of a successful body; none means the answer carries no body (204). */
  readonly schema?: z.ZodType<T>;
  /** A successful body that still means "no such resource" (an empty array for an id). */
  readonly notFoundWhen?: (value: T) => boolean;
  /**
   * The bearer token a successful body issues (login's), known to be real from then on
   * (`onTokenAccepted`), and the account it was issued to.
   */
  readonly issuesToken?: (value: T) => { readonly token: string; readonly account: string };
}

/** The transport bound to one incoming request's context: what operation functions call. */
export interface UpstreamCaller {
  call<T>(spec: CallSpec<T>): Promise<T>;
}

/** One finished attempt, for metrics and call budgets. Never carries headers or bodies. */
export interface UpstreamAttempt {
  readonly operation: OperationName;
  readonly status: number | undefined;
  readonly code: UpstreamErrorCode | undefined;
  readonly durationMs: number;
  readonly retry: boolean;
}
