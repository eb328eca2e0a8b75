import fc from 'fast-check';
import type { GraphQLScalarType } from 'graphql';
import { DateTimeResolver, URLResolver } from 'graphql-scalars';
import { describe, expect, it } from 'vitest';
import { schema } from '../src/schema/index.js';

/*
 * The DateTime and URL scalars answer a value already in graphql-scalars' written form as it came,
 * without parsing it again (src/schema/builder.ts). What a client reads must not change: for any
 * value, the JSON of our answer is the JSON of graphql-scalars' (or both refuse it).
 */

const scalar = (name: string) => schema.getType(name) as GraphQLScalarType;

/** What the client reads: the JSON of the serialised value, or the refusal's message. */
function answered(serialize: (value: unknown) => unknown, value: unknown): string {
  try {
    return JSON.stringify(serialize(value));
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  }
}

const runs = { numRuns: 3_000 };

describe('URL scalar', () => {
  const ours = scalar('URL');
  const pick = <T>(...values: T[]) => fc.constantFrom(...values);
  // Near the edge of the fast path: hosts that read as IPv4 or punycode, ports, dot segments in
  // every spelling, characters the parser encodes, upper case, userinfo, fragments.
  const label = fc.oneof(
    { arbitrary: fc.stringMatching(/^[a-z0-9-]{1,8}$/), weight: 4 },
    fc.stringMatching(/^[a-zA-Z0-9-]{1,8}$/),
    fc.stringMatching(/^xn--[a-z0-9-]{1,6}$/),
  );
  const host = fc.oneof(
    fc.array(label, { minLength: 1, maxLength: 4 }).map((labels) => labels.join('.')),
    pick(
      'cdn.example.test',
      'Cdn.example.test',
      'xn--bcher-kva.example',
      'xn--a.example',
      'example.xn--p1ai',
      '0x7f.1',
      '1.2.3',
      '127.0.0.1',
      'a.0x1f',
      'Example.COM',
      'localhost',
      'a..b',
      'a.b.',
      '[::1]',
      'user@host.test',
      'h%41st.test',
      '-a-.b-',
    ),
  );
  const segment = fc.oneof(
    fc.stringMatching(/^[\w\-.~!$&'()*+,;=:@%]{0,10}$/),
    pick(
      '.',
      '..',
      '%2e',
      '%2E',
      '.%2e',
      '%2e.',
      '%2e%2E',
      '...',
      '.well-known',
      'a b',
      'é',
      '{x}',
      '`',
      '"',
      '<',
      '>',
      '^',
      '|',
      '[',
      ']',
      '\\',
      '%zz',
      '%41',
    ),
  );
  const path = fc.array(segment, { maxLength: 4 }).map((segments) => segments.map((s) => `/${s}`).join(''));
  const query = fc.option(
    fc.oneof(fc.stringMatching(/^[\w\-.~!$&()*+,;=:@/?%']{0,12}$/), pick('a=1', "q='x'", 'a b', 'x=%2e', '/../')),
    { nil: undefined },
  );
  const url = fc
    .tuple(
      pick('https://', 'http://', 'HTTPS://', 'ftp://', 'https:/', 'https:///'),
      host,
      pick('', ':443', ':80', ':8080', ':0080', ':99999'),
      path,
      query,
      pick('', '', '#frag'),
    )
    .map(([scheme, h, port, p, q, fragment]) => `${scheme}${h}${port}${p}${q === undefined ? '' : `?${q}`}${fragment}`);

  it('answers every value as graphql-scalars does, through its own fast path or not', () => {
    fc.assert(
      fc.property(url, (value) => {
        expect(answered((v) => ours.serialize(v), value)).toBe(answered((v) => URLResolver.serialize(v), value));
      }),
      runs,
    );
  });

  it('takes the fast path for the usual asset address', () => {
    const address = 'https://cdn.example.test/heads/a1b2c3d4-0000-4000-8000-00000000002a.glb?v=2';
    expect(ours.serialize(address)).toBe(address);
    expect(ours.serialize('HTTPS://CDN.example.test/a/../b')).toBe('https://cdn.example.test/b');
  });
});

describe('DateTime scalar', () => {
  const ours = scalar('DateTime');
  // The upstream's body check refuses a timestamp naming a day that does not exist, so only real
  // instants reach the scalar: written with Z or an offset, with 0 to 6 fraction digits.
  const timestamp = fc
    .tuple(
      fc.date({
        min: new Date('0001-01-01T00:00:00.000Z'),
        max: new Date('9999-12-31T23:59:59.999Z'),
        noInvalidDate: true,
      }),
      fc.integer({ min: 0, max: 6 }),
      fc.constantFrom('Z', '+02:00', '-05:30', '+00:00'),
    )
    .map(([date, digits, zone]) => {
      const shifted =
        zone === 'Z'
          ? date
          : new Date(
              date.getTime() +
                (zone.startsWith('-') ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4))) * 60_000,
            );
      const [whole, fraction] = shifted.toISOString().slice(0, -1).split('.');
      return `${whole}${digits === 0 ? '' : `.${(`${fraction!}000`).slice(0, digits)}`}${zone}`;
    })
    .filter((value) => !value.startsWith('-') && !value.startsWith('+'));

  it('answers every real instant as graphql-scalars does, whatever its spelling', () => {
    fc.assert(
      fc.property(timestamp, (value) => {
        expect(answered((v) => ours.serialize(v), value)).toBe(answered((v) => DateTimeResolver.serialize(v), value));
      }),
      runs,
    );
  });
});
