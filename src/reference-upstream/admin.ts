import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { writeJson } from './exchange.js';
import { type FaultQueue, faultRequestSchema } from './faults.js';
import type { Recording } from './recording.js';

/** Where the admin endpoints live, for a process that cannot call the upstream's methods (benchmarks). */
export const ADMIN_PREFIX = '/__reference/';

const reply = (res: ServerResponse, status: number, body?: unknown): void =>
  writeJson(res, status, body === undefined ? undefined : JSON.stringify(body));

/**
 * `GET stats` (calls per operation, in flight), `POST reset` (the recording), `POST faults`
 * (`{operation, fault, times}`) and `DELETE faults`, under ADMIN_PREFIX.
 */
export function createAdmin(
  recording: Recording,
  faults: FaultQueue,
): (req: IncomingMessage, res: ServerResponse, path: string) => void {
  return (req, res, path) => {
    const action = `${req.method} ${path.slice(ADMIN_PREFIX.length)}`;
    switch (action) {
      case 'GET stats':
        return reply(res, 200, {
          counts: recording.countsByOperation(),
          total: recording.total(),
          inFlight: recording.inFlight(),
          maxInFlight: recording.maxInFlight(),
        });
      case 'POST reset':
        recording.reset();
        return reply(res, 204);
      case 'DELETE faults':
        faults.clear();
        return reply(res, 204);
      case 'POST faults':
        return queueFault(req, res, faults);
      default:
        return reply(res, 404, { detail: 'Not Found' });
    }
  };
}

function queueFault(req: IncomingMessage, res: ServerResponse, faults: FaultQueue): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let json: unknown;
    try {
      json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return reply(res, 400, { detail: 'body must be JSON {operation, fault, times}' });
    }
    const parsed = faultRequestSchema.safeParse(json);
    if (!parsed.success) return reply(res, 400, { detail: z.prettifyError(parsed.error) });
    faults.inject(parsed.data.operation, parsed.data.fault, parsed.data.times ?? 1);
    reply(res, 204);
  });
}
