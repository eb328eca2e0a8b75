import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/*
 * The Dockerfile's runtime stage without a container (no base image can be pulled here): a fresh
 * dist/ built as the build stage builds it, package.json and package-lock.json, the runtime
 * stage's own `npm ci` line, then the image's CMD. A runtime import whose package sits in
 * devDependencies is missing there and fails it; the second case moves one to prove it would.
 * Slow (a build and two installs): part of the fleet suite, not of `npm test`.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const minutes = 60_000;

/** The runtime stage's `npm ci …` arguments and the CMD, read from the Dockerfile so this runs what the image runs. */
function runtimeStage(): { npmCi: string[]; cmd: string[] } {
  const text = readFileSync(join(root, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const stage = text.slice(text.lastIndexOf('\nFROM '));
  const npmCi = /^RUN .*?\b(npm ci\b[^&;\n]*)/m.exec(stage)?.[1]?.trim().split(/\s+/);
  const cmd = /^CMD (\[.*\])\s*$/m.exec(stage)?.[1];
  if (npmCi === undefined || cmd === undefined)
    throw new Error("the Dockerfile's runtime stage has no `RUN npm ci` or no exec-form CMD");
  return { npmCi, cmd: JSON.parse(cmd) as string[] };
}

function run(command: string, args: string[], cwd: string): void {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8' });
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed (${result.status}):\n${result.stdout}${result.stderr}`);
}

const { npmCi, cmd } = runtimeStage();
let work: string;
let dist: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'runtime-install-'));
  dist = join(work, 'dist');
  // The build stage's `npm run build`, into a directory of its own (a stale dist/ proves nothing).
  run(
    process.execPath,
    [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', dist],
    root,
  );
}, 3 * minutes);
afterAll(() => rmSync(work, { recursive: true, force: true }));

/**
 * A runtime tree as the image holds it: package.json (edited by `edit`), the lockfile, dist/, and the runtime stage's
 * install.
 */
function runtimeTree(name: string, edit: (pkg: Record<string, Record<string, string>>) => void = () => {}): string {
  const dir = join(work, name);
  mkdirSync(dir);
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, Record<string, string>>;
  edit(pkg);
  writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg, null, 2));
  cpSync(join(root, 'package-lock.json'), join(dir, 'package-lock.json'));
  cpSync(dist, join(dir, 'dist'), { recursive: true });
  // --prefer-offline: the packages are in npm's cache already; what is installed is the same.
  const [npm, ...args] = npmCi;
  run(npm!, [...args, '--prefer-offline'], dir);
  return dir;
}

/**
 * The image's CMD in `dir`: resolves with the endpoint of its "Gateway listening on" line, or rejects with its output
 * if it exits first.
 */
async function startAsTheImage(dir: string): Promise<{ endpoint: string; stop: () => Promise<void> }> {
  const [node, ...args] = cmd;
  expect(node).toBe('node');
  // No UPSTREAM_URL: the embedded reference upstream, which NODE_ENV=production (the image's) refuses.
  // No drain on SIGTERM: nothing is in front of it to notice.
  const env = { PATH: process.env.PATH, PORT: '0', HOST: '127.0.0.1', ADMIN_PORT: '0', SHUTDOWN_DELAY_MS: '0' };
  const child = spawn(process.execPath, args, { cwd: dir, env });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = once(child, 'exit');
  const endpoint = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', () => {
      const match = /Gateway listening on (\S+)/.exec(output);
      if (match) resolve(match[1]!);
    });
    void exited.then(([code]) => reject(new Error(`exited (${String(code)}) before listening:\n${output}`)));
  });
  return {
    endpoint,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * Every package dist/ imports, statically or lazily (`import()`, `createRequire(…)(…)`), that does not resolve in
 * `dir`.
 */
function unresolvedImports(dir: string): string[] {
  const specifiers = new Set<string>();
  const walk = (path: string) => {
    for (const entry of readdirSync(path)) {
      const file = join(path, entry);
      if (statSync(file).isDirectory()) walk(file);
      else if (file.endsWith('.js'))
        for (const [, specifier] of readFileSync(file, 'utf8').matchAll(
          /(?:\bfrom\s+|\bimport\s*\(\s*|\brequire\s*\(\s*|\)\(\s*|^import\s+)['"]([^'"]+)['"]/gm,
        ))
          if (!specifier!.startsWith('.') && !isBuiltin(specifier!)) specifiers.add(specifier!);
    }
  };
  walk(join(dir, 'dist'));
  const script = `for (const s of ${JSON.stringify([...specifiers])}) { try { import.meta.resolve(s); } catch { console.log(s); } }`;
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, encoding: 'utf8' });
  return result.stdout.split('\n').filter(Boolean);
}

describe("the Dockerfile's runtime stage: `npm ci --omit=dev` beside dist/, then its CMD", () => {
  it(
    'answers a query, and every package dist/ imports resolves',
    async () => {
      const dir = runtimeTree('runtime');
      expect(unresolvedImports(dir)).toEqual([]);
      const gateway = await startAsTheImage(dir);
      try {
        const response = await fetch(gateway.endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' }),
        });
        expect(response.status).toBe(200);
        const body = (await response.json()) as { data?: { heads: { totalCount: number } }; errors?: unknown };
        expect(body.errors).toBeUndefined();
        expect(body.data?.heads.totalCount).toBeGreaterThan(0);
      } finally {
        await gateway.stop();
      }
    },
    3 * minutes,
  );

  it(
    'fails when a runtime import lives in devDependencies (pino moved there)',
    async () => {
      const dir = runtimeTree('pino-in-dev', (pkg) => {
        pkg.devDependencies!.pino = pkg.dependencies!.pino!;
        delete pkg.dependencies!.pino;
      });
      expect(unresolvedImports(dir)).toEqual(['pino']);
      await expect(startAsTheImage(dir)).rejects.toThrow(/Cannot find package 'pino'/);
    },
    3 * minutes,
  );
});
