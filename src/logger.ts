import { pino, type Logger } from 'pino';

/**
 * Structured JSON logs. Tokens never reach a log line: the Authorization header and anything
 * named like a token are redacted, and request headers are never logged whole anyway.
 */
export function createLogger(options: { level?: string; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: undefined,
      redact: {
        paths: ['authorization', '*.authorization', 'headers.authorization', '*.headers.authorization', 'access_token', '*.access_token', 'accessToken', '*.accessToken', 'password', '*.password'],
        censor: '[redacted]',
      },
    },
    options.destination,
  );
}
