import { type Logger, pino } from 'pino';

/** Lines waiting for a log reader that stopped reading, holding nothing up (some 50,000 operations'); then dropped. */
const LOG_BUFFER_MAX_BYTES = 16 * 1024 * 1024;

/**
 * JSON logs. Request headers and bodies are never logged; as a second guard, token fields are redacted. Lines go out
 * asynchronously (sonic-boom), flushed at exit even on an uncaught exception: a SIGKILL or an out-of-memory abort
 * loses the last few milliseconds' (docs/performance.md#measured-reasons).
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
