import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import { Gauge, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { type Environment, environment } from '../src/config/environment.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { GatewayMetrics } from '../src/server/instruments/metrics.js';
import { probeAnswer } from '../src/server/probes/answers.js';

/*
 * The deploy artifacts (Dockerfile, .dockerignore, compose.yaml, deploy/haproxy/haproxy.cfg,
 * deploy/prometheus/prometheus.yml, deploy/grafana/, deploy/kubernetes/) held to the code they
 * deploy: every variable they set on a gateway is one the config schema knows, with a value it
 * takes; every probe, scrape and health check goes to a path the gateway answers as that kind of
 * probe, on the port the same environment names; the drain arithmetic holds; the objects refer to
 * each other (compose's Prometheus and Grafana, the Kubernetes objects). No image is built and no
 * cluster is reached (see test/fleet/runtime-install.test.ts for the runtime stage's install).
 */

const read = (path: string) => readFileSync(path, 'utf8');
const yamlOf = <T>(path: string): T => parse(read(path)) as T;
type Env = Record<string, string>;

// ---------------------------------------------------------------- what the gateway accepts and serves

/**
 * What is wrong with `env` as a gateway's environment: unknown variables, values the schema refuses, the whole refused
 * by loadConfig.
 */
function envProblems(env: Env, where: string): string[] {
  const shape = environment.shape as Record<string, { safeParse(value: unknown): { success: boolean } }>;
  const problems: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    const field = shape[name];
    if (field === undefined)
      problems.push(`${where}: ${name} is not a variable the gateway reads (src/config/environment.ts)`);
    else if (!field.safeParse(value).success)
      problems.push(`${where}: ${name}=${JSON.stringify(value)} is refused by the schema`);
  }
  if (problems.length === 0) {
    try {
      loadConfig(env);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(`${where}: ${error.message}`);
    }
  }
  if (env.NODE_ENV === 'production' && env.UPSTREAM_URL === undefined)
    problems.push(`${where}: NODE_ENV=production without UPSTREAM_URL: the gateway refuses to start`);
  if (!['0.0.0.0', '::'].includes(env.HOST ?? '127.0.0.1'))
    problems.push(
      `${where}: HOST=${env.HOST ?? '(default 127.0.0.1)'}: probes and peers from outside the container cannot reach it`,
    );
  return problems;
}

/** The parsed values, defaults included (what the process runs with). */
const effective = (env: Env): Environment => environment.parse(env);

const noSources = (ready: boolean) => ({
  ready: async () => ready,
  metrics: { scrape: async () => '# metrics\n', registry: new Registry() },
});
async function statusOf(path: string, upstreamReady: boolean): Promise<number | undefined> {
  const answer = probeAnswer(path, noSources(upstreamReady));
  return answer === undefined ? undefined : (await answer).status;
}
/** A liveness path: answered 200 while the upstream is down (an outage must not restart every replica). */
const isLiveness = async (path: string) =>
  (await statusOf(path, false)) === 200 && (await statusOf(path, true)) === 200;
/** A readiness path: 200 when ready, 503 when not (after SIGTERM too). */
const isReadiness = async (path: string) =>
  (await statusOf(path, true)) === 200 && (await statusOf(path, false)) === 503;
const isMetrics = async (path: string) => {
  const answer = await probeAnswer(path, noSources(true));
  return answer?.status === 200 && (answer.headers['content-type'] ?? '').startsWith('text/plain');
};

// ---------------------------------------------------------------- Dockerfile

interface Instruction {
  readonly keyword: string;
  readonly args: string;
  readonly stage: number;
}
interface Dockerfile {
  readonly stages: { readonly image: string; readonly name: string | undefined }[];
  readonly instructions: Instruction[];
}

function parseDockerfile(text: string): Dockerfile {
  const stages: Dockerfile['stages'] = [];
  const instructions: Instruction[] = [];
  const lines = text
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n');
  for (const line of lines) {
    const match = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!match) continue;
    const keyword = match[1]!.toUpperCase();
    const args = match[2]!.trim();
    if (keyword === 'FROM') {
      const [image, as, name] = args.split(/\s+/);
      stages.push({ image: image!, name: as?.toUpperCase() === 'AS' ? name : undefined });
    }
    instructions.push({ keyword, args, stage: stages.length - 1 });
  }
  return { stages, instructions };
}

const inStage = (file: Dockerfile, stage: number, keyword: string) =>
  file.instructions.filter((i) => i.stage === stage && i.keyword === keyword);
const execForm = (args: string): string[] | undefined =>
  args.startsWith('[') ? (JSON.parse(args) as string[]) : undefined;

function envOfStage(file: Dockerfile, stage: number): Env {
  const env: Env = {};
  for (const { args } of inStage(file, stage, 'ENV')) {
    if (!args.includes('=')) {
      const [name, ...value] = args.split(/\s+/);
      env[name!] = value.join(' ');
      continue;
    }
    for (const [, name, value] of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)/g))
      env[name!] = value!.replace(/^"|"$/g, '');
  }
  return env;
}

const dockerfile = parseDockerfile(read('Dockerfile'));
const runtime = dockerfile.stages.length - 1;
/** The image's environment: what every container of it starts with. */
const imageEnv = envOfStage(dockerfile, runtime);
const imageUser = inStage(dockerfile, runtime, 'USER').at(-1)?.args;
/** The uid of the image's user: `node` is 1000 in the node images. */
const imageUid = imageUser === 'node' ? 1000 : Number(imageUser?.split(':')[0]);
const packageJson = JSON.parse(read('package.json')) as { scripts: Record<string, string>; engines: { node: string } };

describe('Dockerfile', () => {
  it('builds on Node of the engines field, on Debian bookworm slim, in a build stage and a runtime stage', () => {
    const major = /(\d+)/.exec(packageJson.engines.node)![1];
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(2);
    for (const { image } of dockerfile.stages) expect(image).toBe(`node:${major}-bookworm-slim`);
  });

  it('compiles with every dependency in the build stage, and installs only runtime dependencies in the runtime stage', () => {
    const runs = (stage: number) => inStage(dockerfile, stage, 'RUN').map((i) => i.args);
    const build = dockerfile.stages.findIndex(
      (_, index) => index < runtime && runs(index).some((run) => /\bnpm run build\b/.test(run)),
    );
    expect(build, 'a stage before the last runs `npm run build`').toBeGreaterThanOrEqual(0);
    expect(runs(build).some((run) => /\bnpm ci\b/.test(run) && !/--omit/.test(run))).toBe(true);
    expect(runs(runtime).some((run) => /\bnpm ci\b[^&;]*--omit=dev/.test(run))).toBe(true);
    expect(runs(runtime).filter((run) => /\bnpm (install|i|run build)\b/.test(run))).toEqual([]);
    const copies = inStage(dockerfile, runtime, 'COPY').map((i) => i.args);
    const buildName = dockerfile.stages[build]!.name ?? String(build);
    expect(copies.some((copy) => copy.startsWith(`--from=${buildName} `) && /\/dist\s/.test(copy))).toBe(true);
  });

  it('runs dist/main.js with the node flags of `npm start`, not npm, under an init that forwards signals', () => {
    const startFlags =
      /\bnode ((?:--\S+ )*)dist\/main\.js/.exec(packageJson.scripts.start!)?.[1]?.split(' ').filter(Boolean) ?? [];
    const cmd = execForm(inStage(dockerfile, runtime, 'CMD').at(-1)?.args ?? '');
    expect(cmd, 'CMD in exec form: a shell as PID 1 would not pass signals on').toBeDefined();
    expect(cmd).toEqual(['node', ...startFlags, 'dist/main.js']);
    const entrypoint = execForm(inStage(dockerfile, runtime, 'ENTRYPOINT').at(-1)?.args ?? '') ?? [];
    const init = /\/(tini|dumb-init)$/.exec(entrypoint[0] ?? '')?.[1];
    expect(init, 'ENTRYPOINT is tini or dumb-init').toBeDefined();
    if (init === 'tini') expect(entrypoint.slice(1)).toEqual(['--']);
    expect(
      inStage(dockerfile, runtime, 'RUN').some((i) => new RegExp(`apt-get install[^&;]*\\b${init}\\b`).test(i.args)),
      `${init} installed in the runtime stage`,
    ).toBe(true);
  });

  it('sets a production environment the gateway accepts, listening beyond the container, and exposes its two ports', () => {
    expect(imageEnv.NODE_ENV).toBe('production');
    expect(envProblems({ ...imageEnv, UPSTREAM_URL: 'http://upstream:8080/v2' }, 'Dockerfile ENV')).toEqual([]);
    const exposed = inStage(dockerfile, runtime, 'EXPOSE').flatMap((i) =>
      i.args.split(/\s+/).map((port) => port.replace(/\/tcp$/, '')),
    );
    const ports = effective(imageEnv);
    expect(ports.ADMIN_PORT).toBeDefined();
    expect(exposed.sort()).toEqual([String(ports.PORT), String(ports.ADMIN_PORT)].sort());
  });

  it('runs as a user other than root, and bakes in no secret', () => {
    expect(imageUser).toBeDefined();
    expect(['root', '0'].includes(imageUser!.split(':')[0]!)).toBe(false);
    expect(imageUid).toBeGreaterThan(0);
    const names = [
      ...Object.keys(imageEnv),
      ...dockerfile.instructions.filter((i) => i.keyword === 'ARG').map((i) => i.args.split('=')[0]!),
    ];
    expect(names.filter((name) => /PASSWORD|SECRET|TOKEN|KEY|REDIS_URL/i.test(name))).toEqual([]);
  });

  it('copies into the build only what .dockerignore lets through, and that is no local state', () => {
    const patterns = read('.dockerignore')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    expect(patterns[0], 'an allow-list: everything ignored, then what the build needs').toBe('*');
    const allowed = patterns.filter((p) => p.startsWith('!')).map((p) => p.slice(1).replace(/\/$/, ''));
    const sources = dockerfile.instructions
      .filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))
      .flatMap((i) =>
        i.args
          .split(/\s+/)
          .filter((a) => !a.startsWith('--'))
          .slice(0, -1),
      );
    for (const source of sources) {
      const path = source.replace(/^\.\//, '').replace(/\/$/, '');
      expect(
        allowed.some((a) => path === a || path.startsWith(`${a}/`)),
        `${source} is let through`,
      ).toBe(true);
      expect(existsSync(path), `${source} exists`).toBe(true);
    }
    expect(allowed.filter((a) => /^(node_modules|dist|\.git|\.env)/.test(a))).toEqual([]);
  });

  it('builds dist/ from src/ so dist/main.js and dist/reference-upstream/main.js are the files compose and CMD run', () => {
    const build = JSON.parse(read('tsconfig.build.json')) as { compilerOptions: { outDir: string; rootDir: string } };
    expect(build.compilerOptions).toMatchObject({ outDir: 'dist', rootDir: 'src' });
    expect(existsSync('src/main.ts')).toBe(true);
    expect(existsSync('src/reference-upstream/main.ts')).toBe(true);
  });
});

// ---------------------------------------------------------------- compose.yaml and haproxy.cfg

interface ComposeService {
  image?: string;
  build?: string | { context: string };
  command?: string[];
  environment?: Record<string, string | number | boolean>;
  ports?: string[];
  volumes?: string[];
  healthcheck?: { test: string[] };
  stop_grace_period?: string;
}
const compose = yamlOf<{ services: Record<string, ComposeService> }>('compose.yaml');
const stringEnv = (env: ComposeService['environment']): Env =>
  Object.fromEntries(Object.entries(env ?? {}).map(([k, v]) => [k, String(v)]));
const gateways = Object.entries(compose.services).filter(([name]) => /^gateway-\d+$/.test(name));
const builtHere = (service: ComposeService) =>
  (typeof service.build === 'string' ? service.build : service.build?.context) === '.';
/** A compose container's environment: the image's, then the service's. */
const composeEnv = (service: ComposeService): Env =>
  builtHere(service) ? { ...imageEnv, ...stringEnv(service.environment) } : stringEnv(service.environment);

/** Seconds of a compose duration (`25s`, `1m30s`). */
function durationMs(value: string): number {
  let ms = 0;
  for (const [, amount, unit] of value.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g))
    ms += Number(amount) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit as 'ms']!;
  return ms;
}

const haproxyCfgPath = 'deploy/haproxy/haproxy.cfg';
const haproxy = compose.services.haproxy;
const haproxyEnv = stringEnv(haproxy?.environment);
/** haproxy.cfg's lines, comments dropped. */
const haproxyConfig = () =>
  read(haproxyCfgPath)
    .split('\n')
    .map((line) => line.replace(/(^|\s)#.*$/, '').trim())
    .filter((line) => line !== '');
/** The same with haproxy's environment substituted, as HAProxy reads them. */
const haproxyLines = () =>
  haproxyConfig().map((line) =>
    line.replace(/"?\$\{([A-Za-z0-9_]+)\}"?/g, (_, name: string) => haproxyEnv[name] ?? `<unset ${name}>`),
  );

describe('compose.yaml', () => {
  it('runs several gateway replicas of this image, with the command of the image', () => {
    expect(gateways.length).toBeGreaterThanOrEqual(2);
    for (const [name, service] of gateways) {
      expect(builtHere(service), `${name} is built from this Dockerfile`).toBe(true);
      expect(service.command, `${name} runs the image's CMD`).toBeUndefined();
    }
  });

  it('sets on each gateway only variables the gateway reads, with values it takes', () => {
    expect(gateways.flatMap(([name, service]) => envProblems(composeEnv(service), `compose ${name}`))).toEqual([]);
  });

  it('points each gateway at the reference upstream and Redis services, at the ports they listen on', () => {
    for (const [name, service] of gateways) {
      const env = composeEnv(service);
      const upstreamUrl = new URL(env.UPSTREAM_URL!);
      const upstream = compose.services[upstreamUrl.hostname];
      expect(upstream, `${name}'s UPSTREAM_URL names a service`).toBeDefined();
      expect(builtHere(upstream!) && upstream!.command?.join(' ')).toBe('node dist/reference-upstream/main.js');
      const upstreamEnv = composeEnv(upstream!);
      // src/reference-upstream/main.ts: PORT (8080 unset), HOST (127.0.0.1 unset: unreachable from the gateways).
      expect(upstreamUrl.port || '80').toBe(upstreamEnv.PORT ?? '8080');
      expect(upstreamEnv.HOST).toBe('0.0.0.0');
      const redisUrl = new URL(env.REDIS_URL!);
      const redis = compose.services[redisUrl.hostname];
      expect(redis?.image, `${name}'s REDIS_URL names the Redis service`).toMatch(/^redis:/);
      const redisPort = /--port\s+(\d+)/.exec(redis!.command?.join(' ') ?? '')?.[1] ?? '6379';
      expect(redisUrl.port || '6379').toBe(redisPort);
    }
  });

  it('runs Redis bounded and refusing when full, as docs/response-cache.md advises', () => {
    const command = compose.services.redis?.command?.join(' ') ?? '';
    expect(command).toMatch(/--maxmemory \d+\w*/);
    expect(command).toMatch(/--maxmemory-policy noeviction/);
  });

  it("checks each gateway's health at a path it serves, on its admin port", async () => {
    for (const [name, service] of gateways) {
      const test = service.healthcheck?.test.join(' ') ?? '';
      const path = /['"](\/[\w-]*)['"]/.exec(test)?.[1];
      expect(path, `${name}'s healthcheck names a path`).toBeDefined();
      expect(
        (await isReadiness(path!)) || (await isLiveness(path!)),
        `${name}'s healthcheck path ${path} is a probe`,
      ).toBe(true);
      const adminPort = composeEnv(service).ADMIN_PORT!;
      expect(
        test.includes('process.env.ADMIN_PORT') || test.includes(`:${adminPort}/`),
        `${name}'s healthcheck goes to ADMIN_PORT`,
      ).toBe(true);
    }
  });

  it('gives each gateway longer than its drain to stop before Docker kills it', () => {
    for (const [name, service] of gateways) {
      const env = effective(composeEnv(service));
      expect(service.stop_grace_period, `${name} sets stop_grace_period (Docker's default is 10 s)`).toBeDefined();
      expect(durationMs(service.stop_grace_period!)).toBeGreaterThan(env.SHUTDOWN_DELAY_MS + env.SHUTDOWN_GRACE_MS);
      expect(env.SHUTDOWN_GRACE_MS, 'an operation admitted before the stop may finish').toBeGreaterThanOrEqual(
        env.OPERATION_TIMEOUT_MS,
      );
    }
  });

  it("publishes HAProxy's listener as the one way to the gateways, and Prometheus and Grafana, all on loopback only", () => {
    const publishing = Object.entries(compose.services).filter(([, service]) => (service.ports ?? []).length > 0);
    expect(publishing.map(([name]) => name).sort()).toEqual(['grafana', 'haproxy', 'prometheus']);
    expect(haproxy!.ports).toHaveLength(1);
    const containerPort = haproxy!.ports![0]!.split(':').at(-1);
    expect(haproxyEnv.LISTEN?.split(':').at(-1)).toBe(containerPort);
    for (const [name, service] of publishing)
      for (const port of service.ports!) expect(port, `${name} publishes on loopback only`).toMatch(/^127\.0\.0\.1:/);
  });

  it("has HAProxy write each client's address into X-Forwarded-For, and the gateways trust that one proxy alone (TRUST_PROXY=1)", () => {
    expect(haproxyConfig()).toContain('option forwardfor');
    // One hop: the address HAProxy appended, never what a client wrote before it.
    for (const [name, service] of gateways) expect(composeEnv(service).TRUST_PROXY, name).toBe('1');
  });

  it('gives HAProxy every variable haproxy.cfg reads, and none it does not', () => {
    expect(haproxy?.image).toMatch(/^haproxy:/);
    expect(haproxy!.volumes?.some((v) => v.startsWith(`./${haproxyCfgPath}:`))).toBe(true);
    const used = new Set(
      haproxyConfig().flatMap((line) => [...line.matchAll(/\$\{([A-Za-z0-9_]+)\}/g)].map((m) => m[1]!)),
    );
    expect([...used].filter((name) => !(name in haproxyEnv))).toEqual([]);
    expect(Object.keys(haproxyEnv).filter((name) => !used.has(name))).toEqual([]);
  });

  it("sends HAProxy's servers to every gateway's public port and its checks to the admin port's readiness path", async () => {
    const lines = haproxyLines();
    const servers = lines.filter((line) => line.startsWith('server '));
    const targets = servers.map((line) => {
      const [, , address] = line.split(/\s+/);
      const [host, port] = address!.split(':');
      return {
        host: host!,
        port: port!,
        checkPort: /\bport\s+(\d+)/.exec(line)?.[1],
        checked: /\scheck(\s|$)/.test(line),
      };
    });
    expect(targets.map((t) => t.host).sort()).toEqual(gateways.map(([name]) => name).sort());
    for (const target of targets) {
      const env = composeEnv(compose.services[target.host]!);
      expect(target.port, `${target.host}'s public port`).toBe(env.PORT);
      expect(target.checked, `${target.host} is health-checked`).toBe(true);
      expect(target.checkPort, `${target.host} is checked on its admin port`).toBe(env.ADMIN_PORT);
    }
    const checkPath = lines
      .map(
        (line) =>
          /^option httpchk(?:\s+GET)?\s+(\/\S*)/.exec(line)?.[1] ??
          /^http-check send .*\buri\s+(\/\S*)/.exec(line)?.[1],
      )
      .find(Boolean);
    expect(checkPath, 'haproxy.cfg checks an HTTP path').toBeDefined();
    expect(await isReadiness(checkPath!), `${checkPath} is the readiness path`).toBe(true);
  });

  it('drains each gateway for longer than HAProxy takes to see /ready fail (inter x fall)', () => {
    const lines = haproxyLines();
    const setting = (name: string) =>
      lines
        .map((line) =>
          /^(default-server|server)\s/.test(line) ? new RegExp(`\\s${name}\\s+(\\S+)`).exec(line)?.[1] : undefined,
        )
        .find(Boolean);
    // HAProxy's defaults: inter 2s, fall 3.
    const inter = durationMs(
      /^\d+$/.test(setting('inter') ?? '') ? `${setting('inter')}ms` : (setting('inter') ?? '2s'),
    );
    const fall = Number(setting('fall') ?? 3);
    for (const [name, service] of gateways)
      expect(effective(composeEnv(service)).SHUTDOWN_DELAY_MS, name).toBeGreaterThan(inter * fall);
  });

  it('keeps idle streams and upgraded WebSockets: every idle timeout outlasts the heartbeat, a tunnel timeout of its own', () => {
    const lines = haproxyLines();
    const timeout = (name: string) =>
      lines.map((line) => new RegExp(`^timeout\\s+${name}\\s+(\\S+)$`).exec(line)?.[1]).find(Boolean);
    for (const [name, service] of gateways) {
      const heartbeatMs = effective(composeEnv(service)).SUBSCRIPTION_HEARTBEAT_MS;
      for (const idle of ['client', 'server', 'tunnel'])
        expect(durationMs(timeout(idle)!), `${name}: timeout ${idle}`).toBeGreaterThan(heartbeatMs);
    }
    expect(durationMs(timeout('tunnel')!)).toBeGreaterThanOrEqual(3_600_000);
  });
});

// ---------------------------------------------------------------- compose.yaml's Prometheus and Grafana

/** Where a compose service's `path` comes from: the file or folder of this repository mounted there. */
function hostPath(service: ComposeService | undefined, path: string): string | undefined {
  for (const volume of service?.volumes ?? []) {
    const [host, container] = volume.split(':');
    if (path === container || path.startsWith(`${container}/`)) return join(host!, path.slice(container!.length));
  }
  return undefined;
}

interface ScrapeConfig {
  job_name: string;
  metrics_path?: string;
  static_configs: { targets: string[] }[];
}
/** The file compose's Prometheus reads: the image's default --config.file. */
const PROMETHEUS_CONFIG = '/etc/prometheus/prometheus.yml';
/** Where Grafana reads its provisioning files: the image's default. */
const GRAFANA_PROVISIONING = '/etc/grafana/provisioning';
/** The rules test/prometheus-rules.test.ts checks and unit-tests with promtool. */
const TESTED_RULES = 'deploy/prometheus/gateway.rules.yml';

describe("compose.yaml's Prometheus and Grafana", () => {
  const prometheus = compose.services.prometheus;
  const grafana = compose.services.grafana;
  const prometheusConfig = yamlOf<{ rule_files: string[]; scrape_configs: ScrapeConfig[] }>(
    hostPath(prometheus, PROMETHEUS_CONFIG) ?? PROMETHEUS_CONFIG,
  );

  it('runs pinned images of Prometheus and Grafana', () => {
    expect(prometheus?.image).toMatch(/^prom\/prometheus:v\d+\.\d+\.\d+$/);
    expect(grafana?.image).toMatch(/^grafana\/grafana:\d+\.\d+\.\d+$/);
  });

  it("has Prometheus scrape exactly the gateway services, each at its ADMIN_PORT's metrics path", async () => {
    expect(prometheus?.command, "Prometheus's command is the image's, reading its default config file").toBeUndefined();
    expect(hostPath(prometheus, PROMETHEUS_CONFIG)).toBe('deploy/prometheus/prometheus.yml');
    const [job, ...others] = prometheusConfig.scrape_configs;
    expect(others).toEqual([]);
    expect(job!.job_name, 'the job the rules and the dashboard sum by').toBe('gateway');
    expect(job!.static_configs.flatMap((config) => config.targets).sort()).toEqual(
      gateways.map(([name, service]) => `${name}:${composeEnv(service).ADMIN_PORT}`).sort(),
    );
    expect(await isMetrics(job!.metrics_path ?? '/metrics')).toBe(true);
  });

  it('has Prometheus evaluate the tested rules file, mounted where its config names it', () => {
    expect(prometheusConfig.rule_files).toHaveLength(1);
    for (const file of prometheusConfig.rule_files)
      expect(hostPath(prometheus, posix.join(posix.dirname(PROMETHEUS_CONFIG), file))).toBe(TESTED_RULES);
  });

  it('gives Grafana the Prometheus service as its data source, and the mounted dashboards folder', () => {
    const provisioned = (file: string) => hostPath(grafana, posix.join(GRAFANA_PROVISIONING, file));
    expect(provisioned('datasources/prometheus.yml')).toBe('deploy/grafana/provisioning/datasources/prometheus.yml');
    const { datasources } = yamlOf<{ datasources: { uid: string; type: string; url: string }[] }>(
      provisioned('datasources/prometheus.yml')!,
    );
    expect(datasources).toHaveLength(1);
    const url = new URL(datasources[0]!.url);
    expect(datasources[0]!.type).toBe('prometheus');
    expect(url.hostname).toBe('prometheus');
    // Prometheus listens on 9090 in its container (--web.listen-address's default), the port compose publishes.
    expect(prometheus!.ports!.map((port) => port.split(':').at(-1))).toEqual([url.port]);

    const { providers } = yamlOf<{ providers: { type: string; options: { path: string } }[] }>(
      provisioned('dashboards/gateway.yml')!,
    );
    expect(providers.map((provider) => provider.type)).toEqual(['file']);
    const folder = hostPath(grafana, providers[0]!.options.path);
    expect(folder).toBe('deploy/grafana/dashboards');
    const home = stringEnv(grafana!.environment).GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH;
    if (home !== undefined) expect(existsSync(hostPath(grafana, home) ?? ''), `${home} is a mounted file`).toBe(true);

    // Every panel and variable queries the provisioned data source, by its uid.
    const uids = new Set<string>();
    const collect = (value: unknown): void => {
      if (Array.isArray(value)) for (const item of value) collect(item);
      else if (value !== null && typeof value === 'object') {
        const { datasource } = value as { datasource?: { uid?: string } };
        if (datasource?.uid !== undefined) uids.add(datasource.uid);
        for (const child of Object.values(value)) collect(child);
      }
    };
    const dashboards = readdirSync(folder!).filter((file) => file.endsWith('.json'));
    expect(dashboards.length).toBeGreaterThan(0);
    for (const file of dashboards) collect(JSON.parse(read(join(folder!, file))));
    uids.delete('-- Grafana --');
    expect([...uids]).toEqual([datasources[0]!.uid]);
  });

  it('lets anonymous visitors view the dashboards, not edit them', () => {
    const env = stringEnv(grafana?.environment);
    expect(env.GF_AUTH_ANONYMOUS_ENABLED).toBe('true');
    expect(env.GF_AUTH_ANONYMOUS_ORG_ROLE).toBe('Viewer');
  });
});

// ---------------------------------------------------------------- deploy/kubernetes

const k8s = (file: string) => join('deploy/kubernetes', file);
interface Metadata {
  name: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface Kubernetes {
  apiVersion: string;
  kind: string;
  metadata: Metadata;
  spec?: Record<string, unknown>;
}
interface Probe {
  httpGet: { path: string; port: string | number };
  periodSeconds?: number;
  failureThreshold?: number;
}
interface Container {
  name: string;
  image: string;
  ports: { name?: string; containerPort: number }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  env?: {
    name: string;
    value?: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string }; configMapKeyRef?: { name: string; key: string } };
  }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: Record<string, unknown> & { capabilities?: { drop?: string[] } };
  volumeMounts?: { mountPath: string }[];
}
interface PodSpec {
  terminationGracePeriodSeconds?: number;
  securityContext?: Record<string, unknown>;
  containers: Container[];
  volumes?: unknown[];
  topologySpreadConstraints?: { labelSelector: { matchLabels: Record<string, string> } }[];
}
interface Deployment extends Kubernetes {
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: Metadata; spec: PodSpec };
  };
}
interface Kustomization {
  apiVersion: string;
  kind: string;
  resources: string[];
  configMapGenerator?: { name: string; envs?: string[]; literals?: string[] }[];
  secretGenerator?: unknown[];
  images?: { name: string }[];
}

const kustomization = yamlOf<Kustomization>(k8s('kustomization.yaml'));
const objects = kustomization.resources.map((file) => yamlOf<Kubernetes>(k8s(file)));
const only = <T extends Kubernetes>(kind: string): T => {
  const found = objects.filter((o) => o.kind === kind);
  if (found.length !== 1)
    throw new Error(`expected one ${kind} in kustomization.yaml's resources, found ${found.length}`);
  return found[0] as T;
};
const secretExample = yamlOf<Kubernetes & { stringData: Record<string, string> }>(k8s('secret.example.yaml'));

/** A kustomize env file's variables (`NAME=value` lines; `#` comments). */
function envFile(path: string): Env {
  const env: Env = {};
  for (const line of read(path).split('\n')) {
    const match = /^\s*([^#=\s][^=]*)=(.*)$/.exec(line);
    if (match) env[match[1]!.trim()] = match[2]!;
  }
  return env;
}
const configMaps = new Map(
  (kustomization.configMapGenerator ?? []).map((generator) => [
    generator.name,
    {
      ...Object.assign({}, ...(generator.envs ?? []).map((file) => envFile(k8s(file)))),
      ...Object.fromEntries(
        (generator.literals ?? []).map((literal) => [
          literal.slice(0, literal.indexOf('=')),
          literal.slice(literal.indexOf('=') + 1),
        ]),
      ),
    } as Env,
  ]),
);
const secrets = new Map([[secretExample.metadata.name, secretExample.stringData]]);

/** The container's environment as the kubelet builds it: the image's, then envFrom in order, then env. */
function podEnv(container: Container): Env {
  const env: Env = { ...imageEnv };
  for (const from of container.envFrom ?? []) {
    const source = from.configMapRef ? configMaps.get(from.configMapRef.name) : secrets.get(from.secretRef?.name ?? '');
    if (source === undefined)
      throw new Error(`envFrom ${JSON.stringify(from)} names neither the generated ConfigMap nor the example Secret`);
    Object.assign(env, source);
  }
  for (const variable of container.env ?? []) {
    const ref = variable.valueFrom?.secretKeyRef ?? variable.valueFrom?.configMapKeyRef;
    const value =
      ref === undefined
        ? variable.value
        : (variable.valueFrom?.secretKeyRef ? secrets : configMaps).get(ref.name)?.[ref.key];
    if (value === undefined) throw new Error(`env ${variable.name} resolves to nothing`);
    env[variable.name] = value;
  }
  return env;
}

describe('deploy/kubernetes', () => {
  const deployment = only<Deployment>('Deployment');
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0]!;
  const env = podEnv(container);
  // Parsed in each test: a value the schema refuses fails the test that names it, not the whole suite.
  const settings = () => effective(env);
  const podLabels = deployment.spec.template.metadata.labels ?? {};
  const selects = (selector: Record<string, string> | undefined) =>
    selector !== undefined &&
    Object.keys(selector).length > 0 &&
    Object.entries(selector).every(([k, v]) => podLabels[k] === v);
  /** The containerPort a probe's or a Service's port names (by name or number). */
  const portNumber = (port: string | number | undefined) =>
    typeof port === 'number' ? port : container.ports.find((p) => p.name === port)?.containerPort;

  it("has an Ingress example for streams beside the base: no buffering, timeouts past the heartbeat, to the Service's public port", () => {
    const ingress = yamlOf<{
      kind: string;
      metadata: { annotations: Record<string, string> };
      spec: { rules: { http: { paths: { backend: { service: { name: string; port: { name: string } } } }[] } }[] };
    }>('deploy/kubernetes/ingress.example.yaml');
    expect(ingress.kind).toBe('Ingress');
    const { annotations } = ingress.metadata;
    expect(annotations['nginx.ingress.kubernetes.io/proxy-buffering']).toBe('off');
    for (const name of ['proxy-read-timeout', 'proxy-send-timeout'])
      expect(Number(annotations[`nginx.ingress.kubernetes.io/${name}`]) * 1000, name).toBeGreaterThan(
        settings().SUBSCRIPTION_HEARTBEAT_MS,
      );
    const service = only<Kubernetes & { spec: { ports: { name: string }[] } }>('Service');
    for (const path of ingress.spec.rules.flatMap((rule) => rule.http.paths)) {
      expect(path.backend.service.name).toBe(service.metadata.name);
      expect(service.spec.ports.map((port) => port.name)).toContain(path.backend.service.port.name);
    }
  });

  it('is a kustomize base of a Deployment, a Service, an autoscaler and a disruption budget, in their stable API versions', () => {
    expect(kustomization).toMatchObject({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization' });
    expect(objects.map((o) => `${o.apiVersion} ${o.kind}`).sort()).toEqual([
      'apps/v1 Deployment',
      'autoscaling/v2 HorizontalPodAutoscaler',
      'policy/v1 PodDisruptionBudget',
      'v1 Service',
    ]);
    for (const o of objects) expect(o.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    expect(container.image, "the container's image is the one kustomization.yaml sets").toBe(
      kustomization.images?.[0]?.name,
    );
  });

  it('takes its environment from the generated ConfigMap and a Secret that is not in the base', () => {
    expect(
      container.envFrom?.some((from) => from.configMapRef !== undefined && configMaps.has(from.configMapRef.name)),
    ).toBe(true);
    expect(Object.keys(secretExample.stringData)).toContain('REDIS_URL');
    const referenced = [
      ...(container.envFrom ?? []).map((from) => from.secretRef?.name),
      ...(container.env ?? []).map((v) => v.valueFrom?.secretKeyRef?.name),
    ];
    expect(referenced).toContain(secretExample.metadata.name);
    // The example holds no secret and is never applied with the base.
    expect(kustomization.resources).not.toContain('secret.example.yaml');
    expect(kustomization.secretGenerator).toBeUndefined();
    expect(
      Object.keys(configMaps.get(container.envFrom!.find((f) => f.configMapRef)!.configMapRef!.name)!),
    ).not.toContain('REDIS_URL');
  });

  it('sets only variables the gateway reads, with values it takes', () => {
    expect(envProblems(env, 'Kubernetes pod')).toEqual([]);
    expect(new URL(env.UPSTREAM_URL!).hostname, 'UPSTREAM_URL is a placeholder the operator changes').toMatch(
      /example\.(com|org|net)$/,
    );
  });

  it('names container ports for PORT and ADMIN_PORT, and the Service sends clients to the public one only', () => {
    expect(settings().ADMIN_PORT).toBeDefined();
    expect(container.ports.map((p) => p.containerPort).sort()).toEqual(
      [settings().PORT, settings().ADMIN_PORT!].sort(),
    );
    for (const port of container.ports) expect(port.name).toMatch(/^[a-z0-9-]{1,15}$/);
    const service = only<
      Kubernetes & { spec: { selector: Record<string, string>; ports: { targetPort: string | number }[] } }
    >('Service');
    expect(selects(service.spec.selector), "the Service selects the Deployment's pods").toBe(true);
    expect(service.spec.ports.map((p) => portNumber(p.targetPort))).toEqual([settings().PORT]);
  });

  it('probes liveness and readiness at the paths the gateway serves as such, on ADMIN_PORT by name', async () => {
    for (const [kind, probe, is] of [
      ['liveness', container.livenessProbe, isLiveness],
      ['readiness', container.readinessProbe, isReadiness],
    ] as const) {
      expect(probe, kind).toBeDefined();
      expect(typeof probe!.httpGet.port, `${kind} probe names its port`).toBe('string');
      expect(portNumber(probe!.httpGet.port), `${kind} probe on ADMIN_PORT`).toBe(settings().ADMIN_PORT);
      expect(await is(probe!.httpGet.path), `${probe!.httpGet.path} is a ${kind} path`).toBe(true);
    }
  });

  it('asks Prometheus to scrape /metrics on ADMIN_PORT', async () => {
    const annotations = deployment.spec.template.metadata.annotations ?? {};
    expect(annotations['prometheus.io/scrape']).toBe('true');
    expect(Number(annotations['prometheus.io/port'])).toBe(settings().ADMIN_PORT);
    expect(await isMetrics(annotations['prometheus.io/path'] ?? '/metrics')).toBe(true);
  });

  it('drains before the kubelet kills: terminationGracePeriodSeconds past delay plus grace, readiness failing well inside the delay', () => {
    expect(pod.terminationGracePeriodSeconds! * 1000).toBeGreaterThan(
      settings().SHUTDOWN_DELAY_MS + settings().SHUTDOWN_GRACE_MS,
    );
    expect(settings().SHUTDOWN_GRACE_MS, 'an operation admitted before the stop may finish').toBeGreaterThanOrEqual(
      settings().OPERATION_TIMEOUT_MS,
    );
    // After SIGTERM /ready answers 503 at once; the kubelet marks the pod not ready after
    // failureThreshold failed probes, at most period x failureThreshold later. That takes at most
    // half the delay, leaving the other half for the endpoint change to reach every proxy.
    const readiness = container.readinessProbe!;
    const noticedMs = (readiness.periodSeconds ?? 10) * (readiness.failureThreshold ?? 3) * 1000;
    expect(noticedMs).toBeLessThanOrEqual(settings().SHUTDOWN_DELAY_MS / 2);
  });

  it('runs restricted: non-root as the image user, no privilege escalation, no capabilities, a read-only root the gateway never writes to', () => {
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: imageUid,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container.securityContext?.privileged).not.toBe(true);
    // Were the gateway to write files, it would need a writable volume mounted where it writes.
    if ((container.volumeMounts ?? []).length === 0) expect(filesWritingToDisk()).toEqual([]);
  });

  it("requests CPU (the autoscaler's utilization is of the request) and bounds memory", () => {
    expect(container.resources?.requests?.cpu).toBeDefined();
    expect(container.resources?.requests?.memory).toBeDefined();
    expect(container.resources?.limits?.memory).toBeDefined();
  });

  it('lets the autoscaler own the replica count, on CPU, with the shedding gauge as a custom metric example', () => {
    const hpa = only<
      Kubernetes & {
        spec: {
          scaleTargetRef: { apiVersion: string; kind: string; name: string };
          minReplicas: number;
          maxReplicas: number;
          metrics: {
            type: string;
            resource?: { name: string; target: { type: string; averageUtilization: number } };
          }[];
        };
      }
    >('HorizontalPodAutoscaler');
    expect(hpa.spec.scaleTargetRef).toEqual({
      apiVersion: deployment.apiVersion,
      kind: 'Deployment',
      name: deployment.metadata.name,
    });
    expect(
      deployment.spec.replicas,
      'no replicas on the Deployment: applying it would reset what the autoscaler set',
    ).toBeUndefined();
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(hpa.spec.maxReplicas).toBeGreaterThan(hpa.spec.minReplicas);
    const cpu = hpa.spec.metrics.find((m) => m.type === 'Resource' && m.resource?.name === 'cpu');
    expect(cpu?.resource?.target.type).toBe('Utilization');
    expect(cpu!.resource!.target.averageUtilization).toBeGreaterThanOrEqual(60);
    expect(cpu!.resource!.target.averageUtilization).toBeLessThanOrEqual(80);
    // The commented-out Pods metric: a gauge the gateway exports, aimed under what it caps.
    const example = commentedMetric(read(k8s('hpa.yaml')));
    expect(example).toMatchObject({ type: 'Pods', pods: { target: { type: 'AverageValue' } } });
    const gauge = new GatewayMetrics({ defaultMetrics: false }).registry.getSingleMetric(example.pods.metric.name);
    expect(
      gauge,
      `${example.pods.metric.name} is a gauge in GatewayMetrics's registry (src/server/instruments/)`,
    ).toBeInstanceOf(Gauge);
    const cap = loadConfig(env).loadShedding.maxInFlight;
    expect(Number(example.pods.target.averageValue)).toBeLessThan(cap || Infinity);
  });

  it('selects the same pods in the Deployment, the disruption budget and the spread constraint, and lets a drain through', () => {
    expect(selects(deployment.spec.selector.matchLabels)).toBe(true);
    const pdb = only<
      Kubernetes & {
        spec: { maxUnavailable?: number; minAvailable?: number; selector: { matchLabels: Record<string, string> } };
      }
    >('PodDisruptionBudget');
    expect(pdb.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    const hpa = only<Kubernetes & { spec: { minReplicas: number } }>('HorizontalPodAutoscaler');
    if (pdb.spec.minAvailable !== undefined) expect(pdb.spec.minAvailable).toBeLessThan(hpa.spec.minReplicas);
    else expect(pdb.spec.maxUnavailable).toBe(1);
    for (const spread of pod.topologySpreadConstraints ?? [])
      expect(selects(spread.labelSelector.matchLabels)).toBe(true);
  });

  const monitoring = yamlOf<Kustomization>(k8s('monitoring/kustomization.yaml'));
  const monitors = monitoring.resources.map((file) => yamlOf<Kubernetes>(k8s(join('monitoring', file))));
  const monitor = <T extends Kubernetes>(kind: string) => monitors.find((o) => o.kind === kind) as T | undefined;

  it("keeps monitoring/ (the Prometheus Operator's kinds) out of the base: a PodMonitor and a PrometheusRule", () => {
    expect(kustomization.resources.filter((file) => file.startsWith('monitoring'))).toEqual([]);
    expect(monitoring).toMatchObject({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization' });
    expect(monitors.map((o) => `${o.apiVersion} ${o.kind}`).sort()).toEqual([
      'monitoring.coreos.com/v1 PodMonitor',
      'monitoring.coreos.com/v1 PrometheusRule',
    ]);
  });

  it("has the PodMonitor scrape every gateway pod's metrics path on ADMIN_PORT, by the port's name", async () => {
    const podMonitor = monitor<
      Kubernetes & {
        spec: {
          selector: { matchLabels: Record<string, string> };
          podMetricsEndpoints: { port: string; path?: string }[];
        };
      }
    >('PodMonitor')!;
    expect(podMonitor.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    expect(podMonitor.spec.podMetricsEndpoints).toHaveLength(1);
    const [endpoint] = podMonitor.spec.podMetricsEndpoints;
    expect(portNumber(endpoint!.port), 'a named container port, ADMIN_PORT').toBe(settings().ADMIN_PORT);
    expect(await isMetrics(endpoint!.path ?? '/metrics')).toBe(true);
  });

  it("has the PrometheusRule hold deploy/prometheus/gateway.rules.yml's groups, unchanged", () => {
    const rule = monitor<Kubernetes & { spec: { groups: unknown[] } }>('PrometheusRule')!;
    expect(rule.spec.groups).toEqual(yamlOf<{ groups: unknown[] }>(TESTED_RULES).groups);
  });
});

/** The HPA's commented-out `- type: Pods` metric, uncommented and parsed. */
function commentedMetric(text: string): {
  type: string;
  pods: { metric: { name: string }; target: { type: string; averageValue: string } };
} {
  const lines = text.split('\n');
  const start = lines.findIndex((line) => /^\s*#\s*- type: Pods\s*$/.test(line));
  expect(start, 'hpa.yaml has a commented `- type: Pods` example').toBeGreaterThanOrEqual(0);
  const indent = lines[start]!.indexOf('#');
  const block: string[] = [];
  for (const line of lines.slice(start)) {
    if (line.indexOf('#') !== indent || !/^\s*#/.test(line)) break;
    block.push(line.slice(indent + 2));
  }
  return (parse(block.join('\n')) as unknown[])[0] as ReturnType<typeof commentedMetric>;
}

/** Files of src/ calling an API that writes to the file system. */
function filesWritingToDisk(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (
        path.endsWith('.ts') &&
        /\b(writeFile|writeFileSync|appendFile|appendFileSync|createWriteStream|mkdtemp|mkdtempSync|mkdir|mkdirSync|copyFile|tmpdir|writeHeapSnapshot)\b/.test(
          read(path),
        )
      )
        files.push(path);
    }
  };
  walk('src');
  return files;
}

describe('deploy/supergraph: composing the subgraph with rover, wgc and Mesh Compose', () => {
  const schemaFile = (relative: string) => posix.join('deploy/supergraph', relative);

  it("each names the committed subgraph SDL and a routing URL at the gateway's SUBGRAPH_PATH of the docs' examples", () => {
    const rover = parse(read('deploy/supergraph/supergraph.yaml')) as {
      federation_version: string;
      subgraphs: Record<string, { routing_url: string; schema: { file: string } }>;
    };
    const wgc = parse(read('deploy/supergraph/graph.yaml')) as {
      subgraphs: { name: string; routing_url: string; schema: { file: string } }[];
    };
    const mesh = read('deploy/supergraph/mesh.config.ts');
    const meshHeads = /loadGraphQLHTTPSubgraph\('heads', \{\s*endpoint: '([^']+)',\s*source: '([^']+)'/.exec(mesh);
    const heads = [
      { url: rover.subgraphs.heads!.routing_url, file: rover.subgraphs.heads!.schema.file },
      { url: wgc.subgraphs.find((s) => s.name === 'heads')!.routing_url, file: wgc.subgraphs[0]!.schema.file },
      { url: meshHeads![1]!, file: meshHeads![2]! },
    ];
    for (const { url, file } of heads) {
      expect(new URL(url).pathname).toBe('/subgraph');
      expect(posix.normalize(schemaFile(file))).toBe('schema.subgraph.graphql');
    }
    expect(existsSync('schema.subgraph.graphql')).toBe(true);
    // The Federation version rover composes with is the one the SDL links.
    const linked = /specs\.apollo\.dev\/federation\/v(\d+\.\d+)/.exec(read('schema.subgraph.graphql'))![1];
    expect(rover.federation_version).toMatch(new RegExp(`^=${linked!.replace('.', '\\.')}\\.\\d+$`));
  });
});
