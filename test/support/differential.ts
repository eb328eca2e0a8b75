import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { DEMO_CREDENTIALS } from '../../src/reference-upstream/seed.js';
import { startTestGateway, type TestGateway } from './gateway.js';
import { type GeneratedRequest, generatedRequests } from './generated-requests.js';
import { until } from './until.js';

/*
 * The differential comparison (test/differential.test.ts, test/differential-sabotage.test.ts): two
 * gateways, one with COMPILED_EXECUTION=on (compiling at a document's second run) and one with it
 * off, the same settings otherwise, each on a reference upstream of its own seeded alike, sent the
 * same generated requests several times each over a real port. Every send must get the same
 * status, the same response headers, the same body byte for byte (the order of keys is part of
 * the answer) and the same upstream calls.
 */

/**
 * The compiled gateway compiles a document at its second run: a request's first send is
 * interpreted, the others run by compiled code where the document may be compiled.
 */
const COMPILE_AT_RUN = 2;
const SENDS = 4;

export interface Side {
  readonly name: 'compiled' | 'interpreted' | 'http' | 'websocket';
  readonly t: TestGateway;
  readonly endpoint: string;
  /** The demo user's token, issued by this side's own upstream (each upstream knows only its own tokens). */
  readonly token: string;
}

/** A gateway of one side on a reference upstream of its own, the demo user logged in there. */
export async function startSide(name: Side['name'], env: Record<string, string>): Promise<Side> {
  const t = await startTestGateway({ env });
  const login = await t.execute<{ login: { accessToken: string } }>(
    'mutation($input: LoginInput!) { login(input: $input) { accessToken } }',
    { input: DEMO_CREDENTIALS },
  );
  const token = login.data?.login.accessToken;
  if (token === undefined) throw new Error(`${name}: the demo login failed: ${JSON.stringify(login)}`);
  t.reset();
  return { name, t, endpoint: await t.listen(), token };
}

// ---- sending, and what is compared ----

/**
 * Response headers left out of the comparison, each because it differs by nature between two
 * servers answering the same request, not by how the answer was made:
 * - `date`: the wall clock at the moment each server wrote its head. Nothing else is left out (`clockReadings` below
 *   are compared without their clock): `x-request-id` is the one each request sends (echoed identically), `connection`
 *   and `keep-alive` are Node's for a keep-alive request on either side (and a path that closed connections should
 *   show), `content-length` and `etag` follow the body.
 */
const headersBorn = new Set(['date']);

/**
 * Header values that hold a clock's reading, each normalised to what is compared: the rate-limit
 * window's end in whole seconds (`t=`, `RateLimit-Reset`) and what is left of it (`r=`,
 * `RateLimit-Remaining`), which turn with each gateway's own windows (begun a moment apart, so
 * one may have turned while the other has not); the policy and which headers are there are
 * compared.
 */
const clockReadings: Record<string, (value: string) => string> = {
  ratelimit: (value) => value.replace(/;r=\d+/g, ';r=*').replace(/;t=\d+/g, ';t=*'),
  'ratelimit-remaining': () => '*',
  'ratelimit-reset': () => '*',
};

/** What ran a send on the compiled gateway (its metrics around it). */
type Route = 'interpreter' | 'compiled code';

interface Observed {
  readonly status: number;
  /**
   * Every response header as fetch gives them (names lower-cased and sorted, a repeated one joined by commas), but
   * `headersBorn`.
   */
  readonly headers: [string, string][];
  readonly body: string;
  /**
   * The upstream calls the send made, as `operation method path?query → status`, sorted (calls in flight together
   * arrive in any order).
   */
  readonly calls: string[];
}

const counted = async (t: TestGateway): Promise<number> =>
  (await t.metrics.compiledExecutions.get()).values[0]?.value ?? 0;

/** One send of a request to one side: its answer and the upstream calls it made. */
async function send(
  on: Side,
  request: GeneratedRequest,
  text: string,
  requestId: string,
): Promise<Observed & { route: Route }> {
  const headers: Record<string, string> = { 'x-request-id': requestId, 'accept-encoding': request.acceptEncoding };
  if (request.accept !== undefined) headers.accept = request.accept;
  if (request.origin !== undefined) headers.origin = request.origin;
  if (request.auth !== 'none')
    headers.authorization = `Bearer ${request.auth === 'demo token' ? on.token : 'not-a-token-of-this-upstream'}`;
  let url = on.endpoint;
  let body: string | undefined;
  const params = {
    query: text,
    ...(request.variables === undefined ? {} : { variables: request.variables }),
    ...(request.operationName === undefined ? {} : { operationName: request.operationName }),
    ...(request.extensions === undefined ? {} : { extensions: request.extensions }),
  };
  if (request.method === 'POST') {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(params);
  } else {
    url += `?${new URLSearchParams(Object.entries(params).map(([key, value]) => [key, typeof value === 'string' ? value : JSON.stringify(value)]))}`;
  }
  on.t.reset();
  const executionsBefore = await counted(on.t);
  const response = await fetch(url, { method: request.method, headers, ...(body === undefined ? {} : { body }) });
  const answer = await response.text();
  // An answer may go out while a sibling's call is still being cancelled: every call ended first.
  await until(() => on.t.reference.inFlight() === 0, `${on.name}: the upstream calls of ${requestId} to end`);
  const executionsAfter = await counted(on.t);
  return {
    status: response.status,
    headers: [...response.headers]
      .filter(([name]) => !headersBorn.has(name))
      .map(([name, value]) => [name, clockReadings[name]?.(value) ?? value]),
    body: answer,
    calls: on.t
      .calls()
      .map(
        (call) =>
          `${call.operation ?? '(no route)'} ${call.method} ${call.path}${Object.keys(call.query).length > 0 ? `?${new URLSearchParams(call.query)}` : ''} → ${call.status ?? 'no answer'}`,
      )
      .sort(),
    route: executionsAfter > executionsBefore ? 'compiled code' : 'interpreter',
  };
}

/** The two answers to one send, side by side, for a failure's message. */
function difference(
  request: GeneratedRequest,
  text: string,
  sendIndex: number,
  route: Route,
  a: Observed,
  b: Observed,
): string {
  const lines = [
    `send ${sendIndex + 1} of ${SENDS} differs (the compiled gateway ran it by its ${route})`,
    `request: ${request.method} ${JSON.stringify({ query: text, variables: request.variables, operationName: request.operationName, extensions: request.extensions })}`,
    `  headers: auth ${request.auth}, accept ${request.accept ?? '(fetch default */*)'}, accept-encoding ${request.acceptEncoding}, origin ${request.origin ?? '(none)'}`,
  ];
  const show = (what: string, x: unknown, y: unknown) => {
    if (isDeepStrictEqual(x, y)) return;
    lines.push(
      `${what}:`,
      `  compiled:    ${typeof x === 'string' ? x : JSON.stringify(x)}`,
      `  interpreted: ${typeof y === 'string' ? y : JSON.stringify(y)}`,
    );
  };
  show('status', a.status, b.status);
  const names = [...new Set([...a.headers, ...b.headers].map(([name]) => name))].sort();
  for (const name of names)
    show(
      `header ${name}`,
      a.headers.filter(([n]) => n === name).map(([, v]) => v),
      b.headers.filter(([n]) => n === name).map(([, v]) => v),
    );
  show('body', a.body, b.body);
  show('upstream calls', a.calls, b.calls);
  return lines.join('\n');
}

/** The two sides of a comparison, with `env` set on both. */
export async function startSides(
  env: Record<string, string> = {},
): Promise<{ compiled: Side; interpreted: Side; close: () => Promise<void> }> {
  const [compiled, interpreted] = await Promise.all([
    startSide('compiled', { ...env, COMPILED_EXECUTION: 'on', COMPILED_EXECUTION_AT_RUN: String(COMPILE_AT_RUN) }),
    startSide('interpreted', { ...env, COMPILED_EXECUTION: 'off' }),
  ]);
  return {
    compiled,
    interpreted,
    close: async () => void (await Promise.all([compiled.t.close(), interpreted.t.close()])),
  };
}

/** What the generated requests did, to hold the generator to its purpose. */
export interface Seen {
  requests: number;
  executed: number;
  refused: number;
  withCalls: number;
  readonly routes: Record<Route, number>;
}

/**
 * Sends `runs` generated requests (seeded), each `SENDS` times, to both sides; throws at the first
 * send that differs (fast-check then shrinks it and prints the seed), naming it and showing both
 * answers. Each request's text is its own (a comment at its end), so the compiled gateway meets it
 * anew each time, shrinking included: its first send is always the interpreter's.
 */
export async function compare(
  compiled: Side,
  interpreted: Side,
  options: { readonly seed: number; readonly runs: number; readonly shrink?: boolean },
): Promise<Seen & { readonly sends: number }> {
  // Both upstreams are seeded alike and no mutation is sent: the same heads, in the same order, throughout.
  const ids = compiled.t.reference.store.headIds();
  if (!isDeepStrictEqual(interpreted.t.reference.store.headIds(), ids))
    throw new Error('the two upstreams hold different heads');
  const seen: Seen = {
    requests: 0,
    executed: 0,
    refused: 0,
    withCalls: 0,
    routes: { interpreter: 0, 'compiled code': 0 },
  };
  let run = 0;
  await fc.assert(
    fc.asyncProperty(generatedRequests(ids), async (request) => {
      const id = run++;
      const text = `${request.query}\n# differential run ${id}`;
      seen.requests++;
      for (let i = 0; i < SENDS; i++) {
        // One id per send, the same on both sides: the gateway echoes it in `x-request-id`.
        const requestId = `differential-${id}-${i}`;
        const [a, b] = await Promise.all([
          send(compiled, request, text, requestId),
          send(interpreted, request, text, requestId),
        ]);
        const { route, ...answerA } = a;
        const answerB: Observed = { status: b.status, headers: b.headers, body: b.body, calls: b.calls };
        seen.routes[route]++;
        if (!isDeepStrictEqual(answerA, answerB))
          throw new Error(difference(request, text, i, route, answerA, answerB));
        if (i === 0) {
          if (answerB.body.includes('"data":')) seen.executed++;
          if (/"code":"GRAPHQL_(PARSE|VALIDATION)_FAILED"/.test(answerB.body)) seen.refused++;
          if (answerB.calls.length > 0) seen.withCalls++;
        }
      }
    }),
    { seed: options.seed, numRuns: options.runs, endOnFailure: options.shrink === false },
  );
  return { ...seen, sends: seen.requests * SENDS };
}
