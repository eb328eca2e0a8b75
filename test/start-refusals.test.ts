import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { type AddressInfo, createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { thisBuild } from './support/process.js';

describe('the gateway process', () => {
  it('exits 1 with one line on stderr and no stack trace for a bad value', () => {
    const result = spawnSync(process.execPath, thisBuild.args, {
      cwd: thisBuild.cwd,
      env: { ...process.env, PORT: 'not-a-port' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toEqual(['Configuration error: PORT: expected an integer from 0 to 65535, got "not-a-port"']);
    expect(result.stdout).toBe('');
  });

  describe('on a port it cannot have', () => {
    let held: Server;
    beforeAll(async () => {
      held = createServer();
      held.listen(0, '127.0.0.1');
      await once(held, 'listening');
    });
    afterAll(() => held.close());
    const port = () => String((held.address() as AddressInfo).port);

    it.each([
      ['PORT', {}],
      ['ADMIN_PORT', { PORT: '0' }],
      ['PORT, with WORKERS=2', { WORKERS: '2' }],
    ])('held already (%s): exits 1 with one line on stderr per process that tried, no stack trace', (variable, env) => {
      const result = spawnSync(process.execPath, thisBuild.args, {
        cwd: thisBuild.cwd,
        env: { ...process.env, [variable.split(',')[0]!]: port(), ...env },
        encoding: 'utf8',
        timeout: 20_000,
      });
      expect(result.status).toBe(1);
      const lines = result.stderr.trim().split('\n');
      expect(lines.length).toBeGreaterThanOrEqual(1);
      for (const line of lines)
        expect(line).toBe(
          `Cannot listen on 127.0.0.1:${port()}: the port is in use (another process holds it, a gateway still draining?)`,
        );
      expect(result.stdout).not.toMatch(/Gateway listening/);
    });
  });

  it('refuses to start the embedded reference upstream with NODE_ENV=production', () => {
    const result = spawnSync(process.execPath, thisBuild.args, {
      cwd: thisBuild.cwd,
      env: { ...process.env, NODE_ENV: 'production', UPSTREAM_URL: '' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/^Configuration error: UPSTREAM_URL/);
  });
});
