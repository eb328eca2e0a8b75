import { createServer, STATUS_CODES, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { defaultRoutes, operationNames, type OperationName, type RouteTable } from '../upstream/routes.js';
import { platformTypes, type PlatformTypeValue } from '../upstream/schemas.js';
import type { SeedUser } from './seed.js';
import { HeadShape, ReferenceStore, type HeadPatch, type SubscriptionPatch } from './store.js';
import {
  boolValue,
  dictValue,
  enumValue,
  intQuery,
  isPlainObject,
  missing,
  stringValue,
  uuidValue,
  type ValidationIssue,
} from './validation.js';

export type Fault =
  | { kind: 'latency'; ms: number }
  | { kind: 'status'; status: number; body?: unknown }
  | { kind: 'malformed-json' }
  /** A well-formed JSON body that fails the contract's schema; default `{unexpected:true}`. */
  | { kind: 'off-contract'; body?: unknown }
  /** Destroys the socket without answering. */
  | { kind: 'drop' };

export interface RecordedRequest {
  /** undefined for a path or method outside the route table. */
  operation: OperationName | undefined;
  method: string;
  /** The request path as received (including the `/v2` base), without the query. */
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  /** Parsed JSON, a form object, the raw text when it did not parse, or undefined without a body. */
  body: unknown;
  startedAt: number;
  endedAt?: number;
  /** undefined when no response was sent (drop fault, client gone). */
  status?: number;
}

export interface ReferenceUpstreamOptions {
  /** 0 (default) picks an ephemeral port. */
  port?: number;
  host?: string;
  routes?: RouteTable;
  /** Keep the last requests for tests (default true); benchmarks turn it off. Counting per operation happens either way. */
  record?: boolean;
  keepAliveTimeoutMs?: number;
}

export interface ReferenceUpstream {
  /** Base URL ending in /v2, e.g. http://127.0.0.1:PORT/v2 */
  readonly url: string;
  readonly store: ReferenceStore;
  /** The last RECORDING_LIMIT requests, oldest first. */
  readonly requests: RecordedRequest[];
  inFlight(): number;
  maxInFlight(): number;
  /**
   * Answers at once every request a latency fault is holding, as its timer would have; returns
   * how many. A test holds a response with a long latency and releases it when it has seen
   * what it wanted in flight, instead of guessing how long that takes.
   */
  releaseHeld(): number;
  resetRecording(): void;
  injectFault(operation: OperationName, fault: Fault, times?: number): void;
  clearFaults(): void;
  close(): Promise<void>;
  countsByOperation(): Record<string, number>;
}

export const RECORDING_LIMIT = 10_000;
const BASE_PATH = '/v2';
const ADMIN_PREFIX = '/__reference/';
/** Large enough for any contract body, small enough that a runaway client cannot exhaust memory. */
const BODY_LIMIT = 1 << 20;

export const faultSchema: z.ZodType<Fault> = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('latency'), ms: z.number().int().min(0).max(600_000) }),
  z.object({ kind: z.literal('status'), status: z.number().int().min(200).max(599), body: z.unknown().optional() }),
  z.object({ kind: z.literal('malformed-json') }),
  z.object({ kind: z.literal('off-contract'), body: z.unknown().optional() }),
  z.object({ kind: z.literal('drop') }),
]);

const faultRequestSchema = z.object({
  operation: z.enum(operationNames),
  fault: faultSchema,
  times: z.number().int().min(1).optional(),
});

// ---- routing ----

interface CompiledRoute {
  readonly operation: OperationName;
  readonly method: string;
  /** Path segments; the placeholder segment is matched by prefix/suffix instead. */
  readonly segments: readonly string[];
  readonly paramIndex: number;
  readonly paramPrefix: string;
  readonly paramSuffix: string;
}

type RouteMatch = { route: CompiledRoute; param: string | undefined } | 'method-not-allowed' | undefined;

/**
 * Buckets the route table by segment count once, so a request costs one split and a few string
 * compares. Routes without a placeholder come first: a literal segment (`/heads/ext`) must beat a
 * placeholder (`/heads/{head_id}`) whatever order an override file lists them in.
 */
function compileRoutes(routes: RouteTable): Map<number, CompiledRoute[]> {
  const buckets = new Map<number, CompiledRoute[]>();
  for (const operation of operationNames) {
    const { method, path } = routes[operation];
    const segments = path.split('/');
    const paramIndex = segments.findIndex((s) => s.includes('{'));
    const placeholder = paramIndex < 0 ? '' : segments[paramIndex]!;
    const open = placeholder.indexOf('{');
    const compiled: CompiledRoute = {
      operation,
      method,
      segments,
      paramIndex,
      paramPrefix: paramIndex < 0 ? '' : placeholder.slice(0, open),
      paramSuffix: paramIndex < 0 ? '' : placeholder.slice(placeholder.indexOf('}') + 1),
    };
    const bucket = buckets.get(segments.length) ?? [];
    bucket.push(compiled);
    buckets.set(segments.length, bucket);
  }
  for (const bucket of buckets.values()) bucket.sort((a, b) => Number(a.paramIndex >= 0) - Number(b.paramIndex >= 0));
  return buckets;
}

function matchRoute(buckets: Map<number, CompiledRoute[]>, method: string, relativePath: string): RouteMatch {
  const bucket = buckets.get(countSegments(relativePath));
  if (bucket === undefined) return undefined;
  const parts = relativePath.split('/');
  let pathMatched = false;
  for (const route of bucket) {
    let param: string | undefined;
    let ok = true;
    for (let i = 1; i < parts.length; i++) {
      const part = parts[i]!;
      if (i === route.paramIndex) {
        const { paramPrefix: prefix, paramSuffix: suffix } = route;
        // Starlette's placeholder is [^/]+: an empty value never matches.
        if (part.length <= prefix.length + suffix.length || !part.startsWith(prefix) || !part.endsWith(suffix)) {
          ok = false;
          break;
        }
        param = part.slice(prefix.length, part.length - suffix.length);
      } else if (part !== route.segments[i]) {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    if (route.method === method) return { route, param };
    pathMatched = true;
  }
  return pathMatched ? 'method-not-allowed' : undefined;
}

function countSegments(path: string): number {
  let n = 1;
  for (let i = path.indexOf('/'); i >= 0; i = path.indexOf('/', i + 1)) n++;
  return n;
}

// ---- request bodies ----

type Body =
  | { kind: 'none' }
  | { kind: 'json'; value: unknown }
  | { kind: 'invalid-json'; text: string; error: string }
  | { kind: 'form'; value: Record<string, string> }
  | { kind: 'other'; text: string };

const NO_BODY: Body = { kind: 'none' };

function parseBody(contentType: string | undefined, raw: Buffer): Body {
  if (raw.length === 0) return NO_BODY;
  const text = raw.toString('utf8');
  const type = contentType?.split(';', 1)[0]!.trim().toLowerCase();
  // Like FastAPI, a body without content-type is tried as JSON.
  if (type === undefined || type === 'application/json' || type.endsWith('+json')) {
    try {
      return { kind: 'json', value: JSON.parse(text) };
    } catch (error) {
      return { kind: 'invalid-json', text, error: (error as Error).message };
    }
  }
  if (type === 'application/x-www-form-urlencoded') return { kind: 'form', value: Object.fromEntries(new URLSearchParams(text)) };
  return { kind: 'other', text };
}

function recordedBody(body: Body): unknown {
  switch (body.kind) {
    case 'none':
      return undefined;
    case 'json':
    case 'form':
      return body.value;
    case 'invalid-json':
    case 'other':
      return body.text;
  }
}

/** The JSON object of an Update body, or the FastAPI issue that stops validation of its fields. */
function jsonObjectBody(body: Body, issues: ValidationIssue[]): Record<string, unknown> | undefined {
  switch (body.kind) {
    case 'none':
      issues.push(missing(['body']));
      return undefined;
    case 'invalid-json':
      issues.push({ type: 'json_invalid', loc: ['body'], msg: 'JSON decode error', input: {}, ctx: { error: body.error } });
      return undefined;
    case 'json':
      if (body.value === null) {
        issues.push(missing(['body']));
        return undefined;
      }
      if (isPlainObject(body.value)) return body.value;
      issues.push(modelAttributesType(body.value));
      return undefined;
    case 'form':
      issues.push(modelAttributesType(body.value));
      return undefined;
    case 'other':
      issues.push(modelAttributesType(body.text));
      return undefined;
  }
}

const modelAttributesType = (input: unknown): ValidationIssue => ({
  type: 'model_attributes_type',
  loc: ['body'],
  msg: 'Input should be a valid dictionary or object to extract fields from',
  input,
});

// ---- one exchange ----

interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly operation: OperationName | undefined;
  readonly param: string | undefined;
  readonly query: Record<string, string> | undefined;
  body: Body;
  record: RecordedRequest | undefined;
  finished: boolean;
}

const JSON_TYPE = 'application/json';
const NOT_AUTHENTICATED = JSON.stringify({ detail: 'Not authenticated' });
const NOT_ENOUGH_PERMISSIONS = JSON.stringify({ detail: 'Not enough permissions' });
const HEAD_NOT_FOUND = JSON.stringify({ detail: 'Head not found' });
const NOT_FOUND = JSON.stringify({ detail: 'Not Found' });
const METHOD_NOT_ALLOWED = JSON.stringify({ detail: 'Method Not Allowed' });
const MALFORMED_JSON = '{"items":[{"name":"Head 001 Aurora","id":"';
const DEFAULT_OFF_CONTRACT = { unexpected: true };

const DELETE_ROLES: ReadonlySet<string> = new Set(['admin', 'mod', 'creator']);

/**
 * Starts the in-memory reference implementation of the contract. It serves the route table under
 * `/v2`, plus admin endpoints under `/__reference/` for a process that cannot call the methods.
 */
export async function startReferenceUpstream(options: ReferenceUpstreamOptions = {}): Promise<ReferenceUpstream> {
  const host = options.host ?? '127.0.0.1';
  const record = options.record ?? true;
  const buckets = compileRoutes(options.routes ?? defaultRoutes);
  const store = new ReferenceStore();

  const requests: RecordedRequest[] = [];
  // Indexed by operation position: a counter bump per request, no object key lookups.
  const counts = new Array<number>(operationNames.length).fill(0);
  const operationIndex = new Map(operationNames.map((op, i) => [op, i]));
  const faults = new Map<OperationName, { fault: Fault; remaining: number }[]>();
  let faultsPending = 0;
  /** Requests a latency fault is holding: each one's timer and what answers it. */
  const held = new Map<NodeJS.Timeout, () => void>();
  let inFlight = 0;
  let maxInFlight = 0;

  function finish(ex: Exchange, status: number | undefined): void {
    if (ex.finished) return;
    ex.finished = true;
    inFlight--;
    if (ex.record !== undefined) {
      ex.record.endedAt = performance.now();
      if (status !== undefined) ex.record.status = status;
    }
  }

  function send(ex: Exchange, status: number, json: string | undefined, extraHeaders?: Record<string, string>): void {
    if (json === undefined) {
      ex.res.writeHead(status, extraHeaders);
      ex.res.end();
    } else {
      ex.res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(json), ...extraHeaders });
      ex.res.end(json);
    }
    finish(ex, status);
  }

  const sendIssues = (ex: Exchange, issues: ValidationIssue[]) => send(ex, 422, JSON.stringify({ detail: issues }));
  const unauthorized = (ex: Exchange, body = NOT_AUTHENTICATED) => send(ex, 401, body, { 'www-authenticate': 'Bearer' });

  /** Like OAuth2PasswordBearer: scheme must be Bearer; an unknown token counts as none. */
  function bearerUser(ex: Exchange): Readonly<SeedUser> | undefined {
    const header = ex.req.headers.authorization;
    if (header === undefined) return undefined;
    const space = header.indexOf(' ');
    if (space < 0 || header.slice(0, space).toLowerCase() !== 'bearer') return undefined;
    return store.userForToken(header.slice(space + 1).trim());
  }

  function takeFault(operation: OperationName): Fault | undefined {
    const queue = faults.get(operation);
    const head = queue?.[0];
    if (head === undefined) return undefined;
    if (--head.remaining === 0) queue!.shift();
    faultsPending--;
    return head.fault;
  }

  function applyFault(ex: Exchange, fault: Fault): void {
    switch (fault.kind) {
      case 'latency': {
        const onClose = () => {
          clearTimeout(timer);
          held.delete(timer);
          finish(ex, undefined);
        };
        const answer = () => {
          held.delete(timer);
          ex.res.off('close', onClose);
          if (ex.res.destroyed || ex.req.socket.destroyed) finish(ex, undefined);
          else dispatch(ex);
        };
        const timer = setTimeout(answer, fault.ms);
        held.set(timer, answer);
        // A client that gave up gets nothing; its slot is released at once.
        ex.res.once('close', onClose);
        return;
      }
      case 'status': {
        const noBody = fault.status === 204 || fault.status === 304;
        send(ex, fault.status, noBody ? undefined : JSON.stringify(fault.body ?? { detail: STATUS_CODES[fault.status] ?? 'Injected fault' }));
        return;
      }
      case 'malformed-json':
        send(ex, 200, MALFORMED_JSON);
        return;
      case 'off-contract':
        send(ex, 200, JSON.stringify(fault.body ?? DEFAULT_OFF_CONTRACT));
        return;
      case 'drop':
        ex.req.socket.destroy();
        finish(ex, undefined);
        return;
    }
  }

  // ---- operations ----

  function pathUuid(ex: Exchange, name: string, issues: ValidationIssue[]): string | undefined {
    return uuidValue(ex.param, ['path', name], issues);
  }

  function pageParams(ex: Exchange, issues: ValidationIssue[]) {
    const page = intQuery(ex.query, 'page', 1, { ge: 1 }, issues);
    const size = intQuery(ex.query, 'size', 50, { ge: 1, le: 100 }, issues);
    return { page, size };
  }

  const pageJson = (itemsJson: string, total: number, page: number, size: number) =>
    `{"items":${itemsJson},"total":${total},"page":${page},"size":${size},"pages":${Math.ceil(total / size)}}`;

  function readHead(ex: Exchange, paramName: string, shape: HeadShape, wrapInArray: boolean): void {
    const issues: ValidationIssue[] = [];
    const id = pathUuid(ex, paramName, issues);
    if (id === undefined) return sendIssues(ex, issues);
    const entry = store.findHead(id);
    if (entry === undefined) return send(ex, 404, HEAD_NOT_FOUND);
    const json = store.headJson(entry, shape);
    send(ex, 200, wrapInArray ? `[${json}]` : json);
  }

  const handlers: Record<OperationName, (ex: Exchange) => void> = {
    listHeads(ex) {
      const issues: ValidationIssue[] = [];
      const { page, size } = pageParams(ex, issues);
      if (issues.length > 0) return sendIssues(ex, issues);
      const rows = store.selectHeads({ search: ex.query?.search, style: ex.query?.style });
      const offset = (page - 1) * size;
      const items = rows.slice(offset, offset + size).map((e) => store.headJson(e, HeadShape.A));
      send(ex, 200, pageJson(`[${items.join(',')}]`, rows.length, page, size));
    },

    getHeadExt: (ex) => readHead(ex, 'head_id', HeadShape.A_EXT, false),
    getHeadById: (ex) => readHead(ex, 'id', HeadShape.B, true),
    getHeadExtById: (ex) => readHead(ex, 'id', HeadShape.B_EXT, false),

    listHeadsExt(ex) {
      const issues: ValidationIssue[] = [];
      const limit = intQuery(ex.query, 'limit', 10, { ge: 1, le: 1000 }, issues);
      const skip = intQuery(ex.query, 'skip', 0, { ge: 0 }, issues);
      if (issues.length > 0) return sendIssues(ex, issues);
      const rows = store.selectHeads({ search: ex.query?.search });
      const items = rows.slice(skip, skip + limit).map((e) => store.headJson(e, HeadShape.B_EXT));
      send(ex, 200, `[${items.join(',')}]`);
    },

    updateHead(ex) {
      const issues: ValidationIssue[] = [];
      const id = pathUuid(ex, 'head_id', issues);
      const body = jsonObjectBody(ex.body, issues);
      const patch: HeadPatch = {};
      if (body !== undefined) {
        // null means "not given": name is required on a head, so null cannot mean "clear".
        const field = (name: string) => (body[name] === null ? undefined : body[name]);
        const loc = (name: string) => ['body', name];
        if (field('name') !== undefined) {
          const v = stringValue(field('name'), loc('name'), issues, 100);
          if (v !== undefined) patch.name = v;
        }
        for (const name of ['output_format', 'style', 'version', 'head_metadata'] as const) {
          if (field(name) === undefined) continue;
          const v = dictValue(field(name), loc(name), issues);
          if (v !== undefined) patch[name] = v;
        }
        if (field('hair_id') !== undefined) {
          const v = uuidValue(field('hair_id'), loc('hair_id'), issues);
          if (v !== undefined && !store.hasHair(v)) {
            issues.push({ type: 'value_error', loc: loc('hair_id'), msg: 'Value error, unknown hair', input: field('hair_id') });
          } else if (v !== undefined) {
            patch.hair_id = v;
          }
        }
        if (field('hair_color') !== undefined) {
          const v = stringValue(field('hair_color'), loc('hair_color'), issues);
          if (v !== undefined) patch.hair_color = v;
        }
      }
      if (issues.length > 0 || id === undefined) return sendIssues(ex, issues);
      const entry = store.findHead(id);
      if (entry === undefined) return send(ex, 404, HEAD_NOT_FOUND);
      if (patch.hair_color !== undefined && patch.hair_id === undefined && entry.head.hair_id === undefined) {
        return sendIssues(ex, [
          { type: 'value_error', loc: ['body', 'hair_color'], msg: 'Value error, the head has no hair to colour', input: patch.hair_color },
        ]);
      }
      const updated = store.updateHead(id, patch)!;
      send(ex, 200, store.headJson(updated, HeadShape.A));
    },

    deleteHead(ex) {
      // FastAPI resolves the security dependency before validating parameters: 401/403 come first.
      const user = bearerUser(ex);
      if (user === undefined) return unauthorized(ex);
      if (!DELETE_ROLES.has(user.role)) return send(ex, 403, NOT_ENOUGH_PERMISSIONS);
      const issues: ValidationIssue[] = [];
      const id = pathUuid(ex, 'head_id', issues);
      if (id === undefined) return sendIssues(ex, issues);
      if (!store.deleteHead(id)) return send(ex, 404, HEAD_NOT_FOUND);
      send(ex, 204, undefined);
    },

    getPermissions(ex) {
      if (bearerUser(ex) === undefined) return unauthorized(ex);
      const issues: ValidationIssue[] = [];
      const { page, size } = pageParams(ex, issues);
      if (issues.length > 0) return sendIssues(ex, issues);
      const offset = (page - 1) * size;
      send(ex, 200, pageJson(store.permissionsJson(offset, size), store.permissionCount, page, size));
    },

    updateSubscription(ex) {
      const issues: ValidationIssue[] = [];
      const body = jsonObjectBody(ex.body, issues);
      const patch: SubscriptionPatch = {};
      let organizationId: string | undefined;
      let organizationGiven = false;
      if (body !== undefined) {
        const field = (name: string) => (body[name] === null ? undefined : body[name]);
        const loc = (name: string) => ['body', name];
        if (field('organization_id') !== undefined) {
          organizationGiven = true;
          organizationId = uuidValue(field('organization_id'), loc('organization_id'), issues);
        }
        if (field('platform_type') !== undefined) {
          const v = enumValue<PlatformTypeValue>(field('platform_type'), platformTypes, loc('platform_type'), issues);
          if (v !== undefined) patch.platform_type = v;
        }
        if (field('expire_at') !== undefined) {
          const v = stringValue(field('expire_at'), loc('expire_at'), issues);
          if (v !== undefined) patch.expire_at = v;
        }
        if (field('active') !== undefined) {
          const v = boolValue(field('active'), loc('active'), issues);
          if (v !== undefined) patch.active = v;
        }
        if (field('subscription_type_id') !== undefined) {
          const v = uuidValue(field('subscription_type_id'), loc('subscription_type_id'), issues);
          if (v !== undefined && !store.hasSubscriptionType(v)) {
            issues.push({ type: 'value_error', loc: loc('subscription_type_id'), msg: 'Value error, unknown subscription type', input: field('subscription_type_id') });
          } else if (v !== undefined) {
            patch.subscription_type_id = v;
          }
        }
        if (!organizationGiven) {
          organizationId = bearerUser(ex)?.organization_id;
          if (organizationId === undefined) issues.push(missing(['body', 'organization_id'], body));
        }
      }
      if (issues.length > 0 || organizationId === undefined) return sendIssues(ex, issues);
      const updated = store.updateSubscription(organizationId, patch);
      if (updated === undefined) return send(ex, 404, JSON.stringify({ detail: 'Subscription not found' }));
      send(ex, 200, JSON.stringify(store.subscriptionDto(updated)));
    },

    login(ex) {
      // FastAPI reads Form fields from a form body only; any other body leaves every field missing.
      const form = ex.body.kind === 'form' ? ex.body.value : {};
      const issues: ValidationIssue[] = [];
      // An empty form value counts as absent, as in FastAPI.
      const value = (name: string) => (form[name] === '' ? undefined : form[name]);
      const username = value('username');
      const password = value('password');
      const grantType = value('grant_type');
      if (grantType !== undefined && grantType !== 'password') {
        issues.push({
          type: 'string_pattern_mismatch',
          loc: ['body', 'grant_type'],
          msg: "String should match pattern '^password$'",
          input: grantType,
          ctx: { pattern: '^password$' },
        });
      }
      if (username === undefined) issues.push(missing(['body', 'username']));
      if (password === undefined) issues.push(missing(['body', 'password']));
      if (issues.length > 0 || username === undefined || password === undefined) return sendIssues(ex, issues);
      const token = store.login(username, password);
      if (token === undefined) return unauthorized(ex, JSON.stringify({ detail: 'Incorrect username or password' }));
      send(ex, 200, JSON.stringify({ access_token: token, token_type: 'bearer' }));
    },
  };

  function dispatch(ex: Exchange): void {
    try {
      handlers[ex.operation!](ex);
    } catch (error) {
      // A bug here must surface as a 500 for the client under test, not as a hung request.
      if (!ex.res.headersSent) send(ex, 500, JSON.stringify({ detail: `reference upstream error: ${(error as Error).message}` }));
      else finish(ex, undefined);
    }
  }

  // ---- admin endpoints ----

  function countsByOperation(): Record<string, number> {
    return Object.fromEntries(operationNames.map((op, i) => [op, counts[i]!]));
  }

  function resetRecording(): void {
    requests.length = 0;
    counts.fill(0);
    maxInFlight = inFlight;
  }

  function injectFault(operation: OperationName, fault: Fault, times = 1): void {
    if (!operationIndex.has(operation)) throw new Error(`unknown operation ${operation}`);
    const parsed = faultSchema.parse(fault);
    if (!Number.isInteger(times) || times < 1) throw new Error(`times must be a positive integer, got ${times}`);
    const queue = faults.get(operation) ?? [];
    queue.push({ fault: parsed, remaining: times });
    faults.set(operation, queue);
    faultsPending += times;
  }

  function clearFaults(): void {
    faults.clear();
    faultsPending = 0;
  }

  function releaseHeld(): number {
    const answers = [...held];
    for (const [timer, answer] of answers) {
      clearTimeout(timer);
      answer();
    }
    return answers.length;
  }

  function admin(req: IncomingMessage, res: ServerResponse, path: string): void {
    const reply = (status: number, body?: unknown) => {
      const json = body === undefined ? undefined : JSON.stringify(body);
      res.writeHead(status, json === undefined ? {} : { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(json) });
      res.end(json);
    };
    const action = `${req.method} ${path.slice(ADMIN_PREFIX.length)}`;
    if (action === 'GET stats') {
      const byOperation = countsByOperation();
      return reply(200, { counts: byOperation, total: counts.reduce((a, b) => a + b, 0), inFlight, maxInFlight });
    }
    if (action === 'POST reset') {
      resetRecording();
      return reply(204);
    }
    if (action === 'DELETE faults') {
      clearFaults();
      return reply(204);
    }
    if (action === 'POST faults') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        let json: unknown;
        try {
          json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          return reply(400, { detail: 'body must be JSON {operation, fault, times}' });
        }
        const parsed = faultRequestSchema.safeParse(json);
        if (!parsed.success) return reply(400, { detail: z.prettifyError(parsed.error) });
        injectFault(parsed.data.operation, parsed.data.fault, parsed.data.times ?? 1);
        reply(204);
      });
      return;
    }
    reply(404, { detail: 'Not Found' });
  }

  // ---- the request handler ----

  function remember(ex: Exchange): void {
    if (ex.record === undefined) return;
    ex.record.body = recordedBody(ex.body);
    requests.push(ex.record);
    if (requests.length > RECORDING_LIMIT) requests.shift();
  }

  function proceed(ex: Exchange, match: RouteMatch): void {
    remember(ex);
    if (match === undefined) return send(ex, 404, NOT_FOUND);
    if (match === 'method-not-allowed') return send(ex, 405, METHOD_NOT_ALLOWED);
    // Recorded before the fault is taken, so a test can count the calls that got one.
    const fault = faultsPending > 0 ? takeFault(ex.operation!) : undefined;
    if (fault !== undefined) applyFault(ex, fault);
    else dispatch(ex);
  }

  function onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const queryStart = url.indexOf('?');
    const path = queryStart < 0 ? url : url.slice(0, queryStart);
    if (path.startsWith(ADMIN_PREFIX)) return admin(req, res, path);

    const method = req.method ?? 'GET';
    const match: RouteMatch =
      path.length > BASE_PATH.length && path.startsWith(BASE_PATH) && path.charCodeAt(BASE_PATH.length) === 47
        ? matchRoute(buckets, method, path.slice(BASE_PATH.length))
        : undefined;
    const route = typeof match === 'object' ? match.route : undefined;
    let param = typeof match === 'object' ? match.param : undefined;
    if (param !== undefined && param.includes('%')) {
      try {
        param = decodeURIComponent(param);
      } catch {
        // Left encoded: it then fails UUID parsing with the offending character named.
      }
    }
    const query = queryStart < 0 ? undefined : Object.fromEntries(new URLSearchParams(url.slice(queryStart + 1)));

    const ex: Exchange = { req, res, operation: route?.operation, param, query, body: NO_BODY, record: undefined, finished: false };
    if (route !== undefined) counts[operationIndex.get(route.operation)!]!++;
    if (++inFlight > maxInFlight) maxInFlight = inFlight;
    if (record) {
      ex.record = { operation: ex.operation, method, path, query: query ?? {}, headers: req.headers, body: undefined, startedAt: performance.now() };
    }

    const headers = req.headers;
    const hasBody = (headers['content-length'] !== undefined && headers['content-length'] !== '0') || headers['transfer-encoding'] !== undefined;
    if (!hasBody) return proceed(ex, match);

    const chunks: Buffer[] = [];
    let size = 0;
    let complete = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > BODY_LIMIT) {
        if (!complete) {
          complete = true;
          remember(ex);
          send(ex, 413, JSON.stringify({ detail: 'Request body too large' }), { connection: 'close' });
          req.destroy();
        }
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (complete) return;
      complete = true;
      ex.body = parseBody(headers['content-type'], Buffer.concat(chunks, size));
      proceed(ex, match);
    });
    // The client went away mid-body: nothing to answer, but the in-flight slot must be released.
    req.on('close', () => {
      if (!complete) {
        complete = true;
        finish(ex, undefined);
      }
    });
  }

  const server = createServer(onRequest);
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}${BASE_PATH}`;

  let closing: Promise<void> | undefined;
  function close(): Promise<void> {
    closing ??= new Promise<void>((resolve) => {
      for (const timer of held.keys()) clearTimeout(timer);
      held.clear();
      server.close(() => resolve());
      // server.close alone would wait for idle keep-alive sockets to time out.
      server.closeAllConnections();
    });
    return closing;
  }

  return {
    url,
    store,
    requests,
    inFlight: () => inFlight,
    maxInFlight: () => maxInFlight,
    releaseHeld,
    resetRecording,
    injectFault,
    clearFaults,
    close,
    countsByOperation,
  };
}
