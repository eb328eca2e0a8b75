import { pino, type Logger } from 'pino';

/**
 * Structured JSON logs. Tokens never reach a log line: request headers and bodies are never
 * logged, and as a second guard `authorization`, `token`, `access_token`/`accessToken` and
 * `password` fields (top level or one level down) are redacted.
 *
 * Each line is written to stdout as it is logged, synchronously (pino's own destination with
 * `sync: true`): a line logged is on the pipe before the next statement runs, so the last lines
 * before a crash, a SIGKILL or an out-of-memory abort are not lost with the process. A log reader
 * that stops reading holds the gateway up once the pipe is full, rather than lines piling up in
 * memory.
 */
export function createLogger(options: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: undefined,
      redact: {
        paths: ['authorization', '*.authorization', 'token', '*.token', 'headers.authorization', '*.headers.authorization', 'access_token', '*.access_token', 'accessToken', '*.accessToken', 'password', '*.password'],
        censor: '[redacted]',
      },
    },
    options.destination ?? pino.destination({ dest: 1, sync: true }),
  );
}
