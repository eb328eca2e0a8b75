import { type Logger, pino } from 'pino';

/**
 * Lines waiting for a log reader that stopped reading, at most (some 50,000 operations' lines); later ones are dropped
 * rather than filling the heap.
 */
const LOG_BUFFER_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Structured JSON logs. Tokens never reach a log line: request headers and bodies are never
 * logged, and as a second guard `authorization`, `token`, `access_token`/`accessToken` and
 * `password` fields (top level or one level down) are redacted.
 *
 * Each line is on its way to stdout as it is logged, through pino's own destination (sonic-boom,
 * `sync: false`): a line starts a write at once, and the lines logged while that write is under
 * way go out together in the next. What is still waiting when the process exits, on an uncaught
 * exception too, pino writes synchronously on the way out; a SIGKILL or an out-of-memory abort
 * loses only the lines of the last few milliseconds (what that costs, against the alternatives:
 * docs/performance.md#measured-reasons). A log reader that stops reading no longer holds the gateway
 * up: the lines wait in memory, up to LOG_BUFFER_MAX_BYTES, and those logged past it are dropped.
 */
export function createLogger(options: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: undefined,
      redact: {
        paths: [
          'authorization',
          '*.authorization',
          'token',
          '*.token',
          'headers.authorization',
          '*.headers.authorization',
          'access_token',
          '*.access_token',
          'accessToken',
          '*.accessToken',
          'password',
          '*.password',
        ],
        censor: '[redacted]',
      },
    },
    options.destination ?? pino.destination({ dest: 1, sync: false, maxLength: LOG_BUFFER_MAX_BYTES }),
  );
}
