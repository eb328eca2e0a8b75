import { pino, type Logger } from 'pino';

/**
 * Structured JSON logs. Tokens never reach a log line: request headers and bodies are never
 * logged, and as a second guard `authorization`, `token`, `access_token`/`accessToken` and
 * `password` fields (top level or one level down) are redacted.
 *
 * On stdout they are written in batches (joined here once 4 KB are waiting or a quarter of a
 * second has passed, then written by pino's sonic-boom), so a line per operation is some 15 lines
 * per write instead of a write each; what is left is written when the process exits. The writes are
 * synchronous, as with pino's default destination: an asynchronous write hands each batch to
 * libuv's thread pool, whose thread preempts the event loop of a gateway pinned to one core
 * (12.6 ± 8.5 µs more per `head(id)`, docs/performance.md). A log reader that stops reading
 * holds the gateway up once the pipe is full; asynchronous writes would buffer without bound.
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
const BATCH_BYTES = 4096;

function batchedStdout(): pino.DestinationStream {
  const stdout = pino.destination({ dest: 1, sync: true, minLength: 0 });
  // Lines are joined here, not by sonic-boom's `minLength`: its batch is a string grown a line at
  // a time and measured again in full (Buffer.byteLength) for every line added.
  let lines: string[] = [];
  let length = 0;
  const flush = () => {
    if (lines.length === 0) return;
    const batch = lines.join('');
    lines = [];
    length = 0;
    stdout.write(batch);
  };
  // A quiet gateway's lines still show within a quarter of a second.
  setInterval(flush, FLUSH_EVERY_MS).unref();
  // What is waiting here when the process exits is written then (pino knows nothing of it).
  process.on('exit', flush);
  return {
    write(line: string) {
      lines.push(line);
      length += line.length;
      if (length >= BATCH_BYTES) flush();
    },
  };
}
