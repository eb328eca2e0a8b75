import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { defaultRoutes } from '../src/upstream/routes.js';

const routesDir = mkdtempSync(join(tmpdir(), 'routes-'));
afterAll(() => rmSync(routesDir, { recursive: true, force: true }));
let routesFiles = 0;
const routesFile = (content: string) => {
  const file = join(routesDir, `routes-${++routesFiles}.json`);
  writeFileSync(file, content);
  return file;
};

describe('loadConfig', () => {
  it('applies the defaults', () => {
    expect(loadConfig({})).toEqual({
      upstreamUrl: undefined,
      port: 4000,
      host: '127.0.0.1',
      upstreamTimeoutMs: 10_000,
      upstreamConnections: 100,
      routes: defaultRoutes,
      upstreamKeepAliveMs: 4_000,
      upstreamMaxResponseBytes: 5 * 1024 * 1024,
      upstreamFanout: 10,
      upstreamCallBudget: 100,
      operationTimeoutMs: 15_000,
      introspection: true,
      planner: 'selection',
      corsOrigins: [],
      limits: { maxDepth: 15, maxAliases: 30, maxTokens: 2_000, maxDirectives: 20, maxBodyBytes: 100_000 },
      shutdownGraceMs: 10_000,
      workers: 1,
      logLevel: 'info',
      production: false,
    });
  });

  it('turns introspection off in production unless INTROSPECTION says otherwise, and reads CORS origins', () => {
    expect(loadConfig({ NODE_ENV: 'production', UPSTREAM_URL: 'http://u/v2' }).introspection).toBe(false);
    expect(loadConfig({ NODE_ENV: 'production', INTROSPECTION: 'true' }).introspection).toBe(true);
    expect(loadConfig({ INTROSPECTION: 'off' }).introspection).toBe(false);
    expect(loadConfig({ WORKERS: 'auto' }).workers).toBeGreaterThanOrEqual(1);
    expect(loadConfig({ PLANNER: 'off' }).planner).toBe('plain');
    expect(loadConfig({ CORS_ORIGINS: 'https://app.example.com/, http://localhost:5173' }).corsOrigins).toEqual(['https://app.example.com', 'http://localhost:5173']);
  });

  it('reads every variable, and drops a trailing slash from the upstream URL', () => {
    const config = loadConfig({
      UPSTREAM_URL: 'https://heads.example.com/api/v2/',
      PORT: '8080',
      HOST: '0.0.0.0',
      UPSTREAM_TIMEOUT_MS: '2500',
      UPSTREAM_CONNECTIONS: '8',
      UPSTREAM_ROUTES_FILE: routesFile('{"getHeadExt": {"path": "/heads/{head_id}/extended"}, "updateHead": {"method": "PUT"}}'),
      NODE_ENV: 'production',
    });
    expect(config).toMatchObject({ upstreamUrl: 'https://heads.example.com/api/v2', port: 8080, host: '0.0.0.0', upstreamTimeoutMs: 2500, upstreamConnections: 8, production: true });
    expect(config.routes.getHeadExt).toEqual({ method: 'GET', path: '/heads/{head_id}/extended' });
    expect(config.routes.updateHead).toEqual({ method: 'PUT', path: '/heads/{head_id}' });
    expect(config.routes.listHeads).toEqual(defaultRoutes.listHeads);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it.each([
    [{ UPSTREAM_URL: 'ftp://x/v2' }, /^UPSTREAM_URL: expected an http\(s\) URL ending in \/v2/],
    [{ UPSTREAM_URL: 'http://x/v1' }, /^UPSTREAM_URL: expected an http\(s\) URL ending in \/v2/],
    [{ PORT: 'abc' }, /^PORT: expected an integer from 0 to 65535, got "abc"$/],
    [{ PORT: '70000' }, /^PORT: expected an integer from 0 to 65535/],
    [{ UPSTREAM_TIMEOUT_MS: '0' }, /^UPSTREAM_TIMEOUT_MS: expected an integer from 1/],
    [{ UPSTREAM_CONNECTIONS: '1.5' }, /^UPSTREAM_CONNECTIONS: expected an integer from 1/],
    [{ OPERATION_TIMEOUT_MS: '5000' }, /^OPERATION_TIMEOUT_MS: expected more than UPSTREAM_TIMEOUT_MS \(10000\)/],
    [{ INTROSPECTION: 'maybe' }, /^INTROSPECTION: expected true or false/],
    [{ CORS_ORIGINS: 'not a url' }, /^CORS_ORIGINS: expected a comma-separated list/],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL: expected one of/],
    [{ WORKERS: '0' }, /^WORKERS: expected an integer from 1 to 256/],
    [{ PLANNER: 'maybe' }, /^PLANNER: expected on or off/],
    [{ UPSTREAM_ROUTES_FILE: '/no/such/file.json' }, /^UPSTREAM_ROUTES_FILE: cannot read a JSON object from/],
    [{ UPSTREAM_ROUTES_FILE: routesFile('{"getHead": {}}') }, /^UPSTREAM_ROUTES_FILE: getHead: unknown operation/],
    [{ UPSTREAM_ROUTES_FILE: routesFile('{"deleteHead": {"method": "FETCH"}}') }, /^UPSTREAM_ROUTES_FILE: deleteHead.method: method must be one of/],
    [{ UPSTREAM_ROUTES_FILE: routesFile('{"getHeadById": {"path": "/head"}}') }, /^UPSTREAM_ROUTES_FILE: getHeadById.path: path must contain \{id\}/],
  ])('refuses %o with one line naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});

describe('the gateway process', () => {
  it('exits 1 with one line on stderr and no stack trace for a bad value', () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: { ...process.env, PORT: 'not-a-port' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toEqual(['Configuration error: PORT: expected an integer from 0 to 65535, got "not-a-port"']);
    expect(result.stdout).toBe('');
  });

  it('refuses to start the embedded reference upstream with NODE_ENV=production', () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: { ...process.env, NODE_ENV: 'production', UPSTREAM_URL: '' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/^Configuration error: UPSTREAM_URL/);
  });
});
