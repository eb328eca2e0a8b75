import proxyaddr from 'proxy-addr';
import { z } from 'zod';

/*
 * The kinds of value the environment holds, each refused with one phrase saying what it expects,
 * and the registries the configuration table is read from (scripts/config-table.ts).
 */

/** What the configuration table says of a variable. */
export interface VariableDoc {
  /** What it does: one table cell of Markdown. */
  readonly description: string;
  /** The default cell of a variable without a default value: what holds while it is unset. */
  readonly unset?: string;
}

/** The description of every variable of `environment`. */
export const variableDocs = z.registry<VariableDoc>();

/**
 * What a value must look like, as a refusal words it (`PORT: expected an integer from 0 to
 * 65535, got "x"`) and the table's "accepts" column shows it: one phrase for both.
 */
export const expectations = z.registry<{ readonly expected: string }>();

/** `schema`, its phrase recorded: it must be the one its error options give. */
export function expecting<T extends z.ZodType>(schema: T, expected: string): T {
  expectations.add(schema, { expected });
  return schema;
}

export const integer = (min: number, max: number) => {
  const expected = `an integer from ${min} to ${max}`;
  return expecting(
    z.coerce
      .number({ error: expected })
      .int({ error: expected })
      .min(min, { error: expected })
      .max(max, { error: expected }),
    expected,
  );
};

/** One of a few words: "a or b", or "one of a, b, c". */
export const oneOf = <const T extends readonly [string, ...string[]]>(values: T) => {
  const expected = values.length === 2 ? `${values[0]} or ${values[1]}` : `one of ${values.join(', ')}`;
  return expecting(z.enum(values, { error: expected }), expected);
};

export const flag = () => {
  const expected = 'true or false (or 1/0, on/off)';
  return expecting(
    z
      .enum(['true', 'false', '1', '0', 'on', 'off'], { error: expected })
      .transform((v) => v === 'true' || v === '1' || v === 'on'),
    expected,
  );
};

/**
 * Which proxies in front may name the client in `X-Forwarded-For`, as Express's `trust proxy` says
 * it: none (false), every hop (true: the leftmost, which a client can write itself unless the proxy
 * overwrites the header), the nearest N, or those at these addresses, subnets or named ranges
 * (`loopback`, `linklocal`, `uniquelocal`), the client being the nearest hop not trusted.
 */
export type ProxyTrust = boolean | number | readonly string[];

export const proxyTrust = () => {
  const expected = 'true, false, a number of proxies, or their addresses, subnets or ranges (comma-separated)';
  const refused = (value: string): boolean => {
    try {
      proxyaddr.compile(value.split(',').map((part) => part.trim()));
      return false;
    } catch {
      return true;
    }
  };
  return expecting(
    z
      .string({ error: expected })
      .trim()
      .min(1, { error: expected })
      .refine((value) => /^(true|false|on|off|\d+)$/.test(value) || !refused(value), { error: expected })
      .transform((value): ProxyTrust => {
        if (value === 'true' || value === 'on') return true;
        if (value === 'false' || value === 'off') return false;
        if (/^\d+$/.test(value)) return Number(value) > 0 && Number(value);
        return value.split(',').map((part) => part.trim());
      }),
    expected,
  );
};

export const text = (expected: string) => expecting(z.string().min(1, { error: expected }), expected);

export const httpUrl = (expected: string) => expecting(z.url({ protocol: /^https?$/, error: expected }), expected);

export const upstreamUrl = () => {
  const expected = 'an http(s) URL ending in /v2';
  return expecting(
    z
      .url({ protocol: /^https?$/, error: expected })
      .transform((url) => url.replace(/\/+$/, ''))
      .refine((url) => url.endsWith('/v2'), { error: expected }),
    expected,
  );
};

/** A comma-separated list of names, each matching `pattern`: a set (an operator's allow-list). */
export const names = (pattern: RegExp, expected: string) =>
  expecting(
    z
      .string()
      .transform((value) =>
        value
          .split(',')
          .map((name) => name.trim())
          .filter(Boolean),
      )
      .pipe(z.array(z.string().regex(pattern, { error: expected }), { error: expected }))
      .transform((list): ReadonlySet<string> => new Set(list)),
    expected,
  );

export const origins = () => {
  const expected = 'a comma-separated list of http(s) origins, or *';
  return expecting(
    z
      .string()
      .transform((value) =>
        value
          .split(',')
          .map((origin) => origin.trim())
          .filter(Boolean),
      )
      .pipe(
        z.array(
          z.union([z.literal('*'), z.url({ protocol: /^https?$/ }).transform((url) => new URL(url).origin)], {
            error: expected,
          }),
        ),
      ),
    expected,
  );
};

/**
 * Where the shared state lives (REDIS_URL): one node, a Sentinel-watched master, or a Cluster. Holds a password: never
 * logged.
 */
export type RedisTopology =
  | { readonly kind: 'node'; readonly url: string }
  | {
      readonly kind: 'sentinel';
      readonly sentinels: readonly RedisNode[];
      readonly masterName: string;
      readonly credentials: RedisCredentials;
      readonly tls: boolean;
    }
  | {
      readonly kind: 'cluster';
      readonly nodes: readonly RedisNode[];
      readonly credentials: RedisCredentials;
      readonly tls: boolean;
    };

export interface RedisNode {
  readonly host: string;
  readonly port: number;
}

/** Redis's own user and password (ACL or `requirepass`), for every node of the topology. */
export interface RedisCredentials {
  readonly username?: string | undefined;
  readonly password?: string | undefined;
}

/**
 * `redis[s]-sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]/MASTER_NAME` and
 * `redis[s]-cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]` (Apollo Router's forms: a URL
 * parser takes one host, so these are read here). A port left out is the topology's usual one.
 */
const multiHost = /^(rediss?)-(sentinel|cluster):\/\/(?:([^@/]*)@)?([^@/?#]+)(?:\/([^/?#]*))?$/;
const hostPort = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/;

function topologyOf(value: string): RedisTopology | undefined {
  if (/^rediss?:\/\//.test(value)) return URL.canParse(value) ? { kind: 'node', url: value } : undefined;
  const match = multiHost.exec(value);
  if (match === null) return undefined;
  const [, scheme, kind, userInfo, hosts, path] = match as unknown as [
    string,
    string,
    'sentinel' | 'cluster',
    string | undefined,
    string,
    string | undefined,
  ];
  const nodes: RedisNode[] = [];
  for (const entry of hosts.split(',')) {
    const parts = hostPort.exec(entry.trim());
    const port = Number(parts?.[3] ?? (kind === 'sentinel' ? 26_379 : 6_379));
    if (parts === null || !(port >= 1 && port <= 65_535)) return undefined;
    nodes.push({ host: parts[1] ?? parts[2]!, port });
  }
  const decoded = (part: string | undefined) =>
    part === undefined || part === '' ? undefined : decodeURIComponent(part);
  let credentials: RedisCredentials = {};
  let masterName: string | undefined;
  try {
    if (userInfo !== undefined) {
      const colon = userInfo.indexOf(':');
      credentials =
        colon === -1
          ? { username: decoded(userInfo) }
          : { username: decoded(userInfo.slice(0, colon)), password: decoded(userInfo.slice(colon + 1)) };
    }
    masterName = decoded(path);
  } catch {
    // A stray `%`: not a URL.
    return undefined;
  }
  const tls = scheme === 'rediss';
  if (kind === 'cluster') return masterName === undefined ? { kind, nodes, credentials, tls } : undefined;
  return masterName === undefined ? undefined : { kind, sentinels: nodes, masterName, credentials, tls };
}

export const redisUrl = () => {
  const expected =
    'a redis://, rediss://, redis-sentinel://HOST:PORT[,HOST:PORT…]/MASTER or redis-cluster://HOST:PORT[,HOST:PORT…] URL (rediss-… for TLS)';
  return expecting(
    z.string({ error: expected }).transform((value, context) => {
      const topology = topologyOf(value.trim());
      if (topology === undefined) {
        context.addIssue({ code: 'custom', message: expected });
        return z.NEVER;
      }
      return topology;
    }),
    expected,
  );
};

export const ratio = () => {
  const expected = 'a ratio from 0 to 1';
  return expecting(
    z.coerce.number({ error: expected }).min(0, { error: expected }).max(1, { error: expected }),
    expected,
  );
};

/** A share strictly between 0 and 1 (cockatiel's breaker takes no other). */
export const openRatio = () => {
  const expected = 'a number between 0 and 1, both excluded';
  return expecting(
    z.coerce.number({ error: expected }).gt(0, { error: expected }).lt(1, { error: expected }),
    expected,
  );
};

export const workers = () => {
  const expected = 'a whole number from 1 to 256, or auto';
  return expecting(z.union([z.literal('auto'), integer(1, 256)], { error: expected }), expected);
};

/**
 * `Type=ms,Type=ms`: a TTL in milliseconds per GraphQL type name (that the names are the schema's is checked in
 * config.ts).
 */
export const ttlPerType = () => {
  const expected = 'a comma-separated list of TypeName=milliseconds (an integer from 0 to 31536000000)';
  const entry = z
    .string()
    .trim()
    .regex(/^[_A-Za-z][_0-9A-Za-z]*=\d+$/, { error: expected })
    .transform((text) => {
      const [type, ms] = text.split('=') as [string, string];
      return [type, Number(ms)] as const;
    })
    .refine(([, ms]) => ms <= 31_536_000_000, { error: expected });
  return expecting(
    z
      .string()
      .transform((value) => value.split(',').filter((part) => part.trim() !== ''))
      .pipe(z.array(entry, { error: expected }).min(1, { error: expected }))
      .transform((entries) => Object.fromEntries(entries) as Readonly<Record<string, number>>),
    expected,
  );
};
