import { pino, type Logger } from 'pino';

/**
 * Structured JSON logs. Tokens never reach a log line: request headers and bodies are never
 * logged, and as a second guard `authorization`, `token`, `access_token`/`accessToken` and
 * `password` fields (top level or one level down) are redacted.
 *
 * On stdout they are written asynchronously (pino's sonic-boom, `sync: false`): under load the
 * lines of many operations leave in one write instead of one blocking write each; pino flushes
 * what is left when the process exits.
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
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
