import { pino, type Logger } from 'pino';

/**
 * Structured JSON logs. Tokens never reach a log line: request headers and bodies are never
 * logged, and as a second guard `authorization`, `token`, `access_token`/`accessToken` and
 * `password` fields (top level or one level down) are redacted.
 *
 * On stdout they are written asynchronously and in batches (pino's sonic-boom, `sync: false`,
 * written once 4 KB are waiting or a quarter of a second has passed): a line per operation is
 * then some 15 lines per write instead of a write each. pino flushes what is left when the
 * process exits.
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
    options.destination ?? batchedStdout(),
  );
}

const FLUSH_EVERY_MS = 250;

function batchedStdout(): pino.DestinationStream {
  const stdout = pino.destination({ dest: 1, sync: false, minLength: 4096 });
  // A quiet gateway's lines still show within a quarter of a second.
  setInterval(() => stdout.flush(), FLUSH_EVERY_MS).unref();
  return stdout;
}
