import { describe, type SuiteOptions } from 'vitest';
import which from 'which';

/*
 * The programs some suites drive that `npm ci` does not bring: Debian's redis-server, chromium and promtool (the
 * `prometheus` package), and for the fleet suite (test/fleet) haproxy, redis-cli and prometheus. On a machine without
 * one, its suites are skipped and `skipped-services-reporter.ts` lists them at the end of the run; with
 * REQUIRE_SERVICES=1 (what .ci/run sets) they run and fail instead, so CI never skips them.
 */

export type Service = 'redis-server' | 'chromium' | 'haproxy' | 'redis-cli' | 'promtool' | 'prometheus';

/** The Debian package of each program, where its name differs. */
const packageOf: Partial<Record<Service, string>> = { 'redis-cli': 'redis-tools', promtool: 'prometheus' };

declare module 'vitest' {
  interface TaskMeta {
    /** Why a suite gated by `describeWith` was skipped: what is missing and how to install it. */
    skippedForMissingService?: string;
  }
}

const servicesRequired = !['', '0', 'false'].includes(process.env.REQUIRE_SERVICES ?? '');

const missing = (service: Service) =>
  `${service} is not on the PATH (install it: apt-get install -y ${packageOf[service] ?? service})`;

/** The program's path, looked up on the PATH as a shell would; undefined when it is not installed. */
function locate(service: Service): string | undefined {
  return which.sync(service, { nothrow: true }) ?? undefined;
}

/** The program's path, or an error saying what to install (a suite that runs without it fails with that). */
export function requireProgram(service: Service): string {
  const path = locate(service);
  if (path === undefined)
    throw new Error(
      `${missing(service)}${servicesRequired ? '; REQUIRE_SERVICES is set, so suites that need it fail' : ''}`,
    );
  return path;
}

type Factory = () => void;

/**
 * `describe` for suites that need `services`: `describe.skipIf` when one is not installed and
 * REQUIRE_SERVICES is not set, with the reason in the suite's meta for the reporter.
 */
function describeWith(...services: Service[]) {
  const absent = services.filter((service) => locate(service) === undefined);
  const reason = absent.length > 0 && !servicesRequired ? absent.map(missing).join('; ') : undefined;
  const suite = describe.skipIf(reason !== undefined);
  const withReason = (options: SuiteOptions = {}): SuiteOptions =>
    reason === undefined ? options : { ...options, meta: { ...options.meta, skippedForMissingService: reason } };

  function gated(name: string, fn: Factory): void;
  function gated(name: string, options: SuiteOptions, fn: Factory): void;
  function gated(name: string, optionsOrFn: SuiteOptions | Factory, fn?: Factory): void {
    if (typeof optionsOrFn === 'function') suite(name, withReason(), optionsOrFn);
    else suite(name, withReason(optionsOrFn), fn);
  }
  /** `describe.each(cases)(name, fn)`: one suite per case, `%s` in the name formatted as vitest does. */
  gated.each =
    <T extends unknown[]>(cases: readonly T[]) =>
    (name: string, fn: (...args: T) => void): void =>
      suite.each(cases)(name, withReason(), fn);
  return gated;
}

export const describeWithRedis = describeWith('redis-server');
export const describeWithChromium = describeWith('chromium');
/** Prometheus's own tools for the rules of deploy/prometheus/. */
export const describeWithPromtool = describeWith('promtool');
/** The fleet suite: HAProxy in front of gateways, Redis as a Cluster (made with redis-cli) or with Sentinels. */
export const describeWithFleet = describeWith('haproxy', 'redis-server', 'redis-cli');
/** The fleet watched by a real Prometheus evaluating the shipped rules. */
export const describeWithWatchedFleet = describeWith('haproxy', 'prometheus');
