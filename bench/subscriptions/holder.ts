import { request } from 'node:http';

/*
 * Subscribers for `npm run bench:subscriptions`, in a process of their own (not the load
 * generator's, whose own work would be counted): `holder.ts <url> <head id> <count>` opens <count>
 * SSE subscriptions and says "holding <count>"; then, each time every one of them has had one more
 * event, "event <n> <ms>": when the last of them arrived (performance.timeOrigin + now, a clock
 * the other processes of the machine share). It keeps them until it is stopped.
 */

const [url, id, countText] = process.argv.slice(2) as [string, string, string];
const body = JSON.stringify({ query: `subscription { headChanged(id: "${id}") { head { name } } }` });
const count = Number(countText);
const seen: number[] = [];
let reported = 0;
let lastArrival = 0;
const arrived = (i: number) => {
  seen[i] = (seen[i] ?? 0) + 1;
  lastArrival = performance.timeOrigin + performance.now();
  const all = Math.min(...seen);
  if (seen.length === count && all > reported) {
    reported = all;
    process.stdout.write(`event ${all} ${lastArrival.toFixed(3)}\n`);
  }
};
const open = (i: number) =>
  new Promise<void>((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          accept: 'text/event-stream',
          'content-length': Buffer.byteLength(body),
        },
      },
      (response) => {
        if (response.statusCode !== 200) return reject(new Error(`SSE: ${response.statusCode}`));
        seen[i] = 0;
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          for (let at = chunk.indexOf('event: next'); at !== -1; at = chunk.indexOf('event: next', at + 1)) arrived(i);
        });
        resolve();
      },
    );
    req.on('error', reject);
    req.end(body);
  });
for (let i = 0; i < count; i += 200)
  await Promise.all(Array.from({ length: Math.min(200, count - i) }, (_, k) => open(i + k)));
process.stdout.write(`holding ${count} listening on ${url}\n`);
process.on('SIGINT', () => process.exit(0));
setInterval(() => undefined, 1 << 30);
