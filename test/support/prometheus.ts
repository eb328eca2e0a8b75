import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { endProcess, freePort } from './process.js';
import { requireProgram } from './services.js';
import { until } from './until.js';

/** The rules operators load (deploy/prometheus/), as shipped. */
export const gatewayRules = fileURLToPath(new URL('../../deploy/prometheus/gateway.rules.yml', import.meta.url));

/** An alert as Prometheus's API lists it. */
export interface ActiveAlert {
  readonly labels: Readonly<Record<string, string>>;
  readonly state: 'pending' | 'firing';
  readonly activeAt: string;
}

export interface PrometheusProcess {
  readonly url: string;
  /** Its alerts now, pending and firing. */
  alerts(): Promise<ActiveAlert[]>;
  stop(): Promise<void>;
}

/**
 * Debian's `prometheus` on a free loopback port, scraping `targets` (`host:port` of each gateway's admin port) as job
 * `gateway` and evaluating `rules`, every `intervalSeconds`; its data in a temporary folder, removed on stop.
 */
export async function startPrometheus(
  targets: readonly string[],
  options: { readonly rules?: string; readonly intervalSeconds?: number } = {},
): Promise<PrometheusProcess> {
  const folder = mkdtempSync(join(tmpdir(), 'prometheus-'));
  const interval = `${options.intervalSeconds ?? 1}s`;
  const config = {
    global: { scrape_interval: interval, evaluation_interval: interval },
    rule_files: [options.rules ?? gatewayRules],
    scrape_configs: [{ job_name: 'gateway', static_configs: [{ targets }] }],
  };
  writeFileSync(join(folder, 'prometheus.yml'), JSON.stringify(config));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(requireProgram('prometheus'), [
    `--config.file=${join(folder, 'prometheus.yml')}`,
    `--storage.tsdb.path=${join(folder, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`,
  ]);
  let output = '';
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const stop = async () => {
    await endProcess(child, 'SIGKILL');
    rmSync(folder, { recursive: true, force: true });
  };
  try {
    const ready = async () => (await fetch(`${url}/-/ready`).catch(() => undefined))?.ok === true;
    await until(ready, 'Prometheus ready', 20_000, 100);
  } catch (error) {
    await stop();
    throw new Error(`Prometheus did not start: ${(error as Error).message}\n${output}`);
  }
  return {
    url,
    async alerts() {
      const body = (await (await fetch(`${url}/api/v1/alerts`)).json()) as { data: { alerts: ActiveAlert[] } };
      return body.data.alerts;
    },
    stop,
  };
}
