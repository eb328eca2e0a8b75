import { type Logger, pino } from 'pino';

/** Lines waiting for a log reader that stopped reading (some 50,000 operations'); later ones are dropped. */
const LOG_BUFFER_MAX_BYTES = 16 * 1024 * 1024;

/**
 * JSON logs. Request headers and bodies are never logged; as a second guard, token fields are redacted. Lines go out
 * asynchronously (sonic-boom, `sync: false`: those logged during a write go in the next), flushed at exit, even on an
 * uncaught exception: a SIGKILL or an out-of-memory abort loses the last few milliseconds' (the trade-off:
 * docs/performance.md#measured-reasons). A reader that stops reading does not hold the gateway up: lines wait in
 * memory up to LOG_BUFFER_MAX_BYTES.
 */
export function createLogger(options: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: undefined,
      redact: {
        paths: ['authorization', 'token', 'headers.authorization', 'access_token', 'accessToken', 'password'].flatMap(
          (path) => [path, `*.${path}`],
        ),
        censor: '[redacted]',
      },
    },
    options.destination ?? pino.destination({ dest: 1, sync: false, maxLength: LOG_BUFFER_MAX_BYTES }),
  );
}
