import { isDeepStrictEqual } from 'node:util';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { acceptedBy, configRows, readmeTableProblem } from '../scripts/config-table.js';
import { environment } from '../src/config/environment.js';
import { placedSettings, placeOf, setting } from '../src/config/places.js';
import { flag, integer, text, variableDocs } from '../src/config/values.js';
import { loadConfig } from '../src/config.js';

describe('the environment schema, the one place of every default', () => {
  const variables = Object.entries(environment.shape);

  it('describes every variable, says what it accepts, and what holds while one without a default is unset', () => {
    expect(variables.length).toBeGreaterThan(50);
    for (const [name, schema] of variables) {
      const doc = variableDocs.get(schema);
      expect(doc?.description, name).toMatch(/\w{3}/);
      expect(acceptedBy(schema), name).toMatch(/\w{3}/);
      if (schema.safeParse(undefined).data === undefined) expect(doc?.unset, name).toMatch(/\w{3}/);
    }
  });

  it('says what a variable accepts in the very words its refusal uses', () => {
    let refused = 0;
    for (const [name, schema] of variables) {
      // Any text passes a name or a path here (a file is read later): nothing to compare.
      if (schema.safeParse('not valid').success) continue;
      refused++;
      const got = name === 'REDIS_URL' ? 'something else' : '"not valid"';
      expect(() => loadConfig({ [name]: 'not valid' }), name).toThrow(
        `${name}: expected ${acceptedBy(schema)}, got ${got}`,
      );
    }
    expect(refused).toBeGreaterThan(45);
  });

  it("is what the README's configuration table says: a row per variable, its default as the gateway reads it", () => {
    expect(readmeTableProblem()).toBeUndefined();
    const rows = new Map(configRows().map((row) => [row.name, row]));
    expect([...rows.keys()]).toEqual(variables.map(([name]) => name));
    expect(rows.get('PORT')?.defaultValue).toBe(String(loadConfig({}).port));
    expect(rows.get('COMPILED_EXECUTION_MAX_BYTES')?.defaultValue).toBe('50331648 (48 MiB)');
    expect(rows.get('RATE_LIMIT_IN_FLIGHT')?.defaultValue).toBe('unset: off');
    expect(readmeTableProblem('# no table here\n')).toMatch(/needs one `<!-- config-table:begin/);
  });

  it('puts every variable that declares a place in the settings there, as parsed, whatever its value, in frozen groups', () => {
    // The response cache's group is there only with a TTL; TRUSTED_DOCUMENTS_ONLY needs a manifest.
    const base = { RESPONSE_CACHE_TTL_MS: '60000', TRUSTED_DOCUMENTS_FILE: 'src/generated/persisted-documents.json' };
    const parsed = (env: Record<string, string>): Record<string, unknown> => environment.parse(env);
    let placed = 0;
    for (const [name, schema] of variables) {
      const path = placeOf(schema)?.split('.');
      if (path === undefined) continue;
      placed++;
      const value = otherValue(schema, parsed(base)[name]);
      expect(value, name).toBeDefined();
      const env = { ...base, [name]: value! };
      // The settings, then each group on the way to the variable's place.
      const groups: Record<string, unknown>[] = [loadConfig(env)];
      for (const group of path.slice(0, -1)) groups.push(groups.at(-1)![group] as Record<string, unknown>);
      expect(groups.at(-1)![path.at(-1)!], name).toEqual(parsed(env)[name]);
      for (const group of groups) expect(Object.isFrozen(group), `${name}: ${path.join('.')}`).toBe(true);
    }
    expect(placed).toBeGreaterThan(50);
  });
});

/** A value of a variable, as the environment carries it, that parses to something other than `current`. */
function otherValue(schema: z.ZodType, current: unknown): string | undefined {
  const candidates =
    typeof current === 'number'
      ? [current + 1, current - 1, current / 2].map(String)
      : [
          String(!current),
          `${String(current)}-other`,
          ...optionsOf(schema),
          '1000',
          'http://upstream.test/v2',
          '/other',
        ];
  return candidates.find((candidate) => {
    const parsed = schema.safeParse(candidate);
    return parsed.success && !isDeepStrictEqual(parsed.data, current);
  });
}

/** The words an enum variable takes, inside its default, optional and transforms. */
function optionsOf(schema: z.ZodType): readonly string[] {
  if (schema instanceof z.ZodEnum) return schema.options.map(String);
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional) return optionsOf(schema.unwrap() as z.ZodType);
  if (schema instanceof z.ZodPipe) return optionsOf(schema.in as z.ZodType);
  return [];
}

describe('settings at the places their variables declare (config/places.ts)', () => {
  const shape = z.object({
    DEPTH: setting('limits.maxDepth', integer(1, 10).default(5)),
    ON: setting('on', flag().optional()),
    OTHER: text('any text').optional(),
  }).shape;

  it('groups the variables by their places, typed and frozen, and leaves the others out', () => {
    const settings = placedSettings(shape, { DEPTH: 7, ON: undefined, OTHER: 'x' });
    expectTypeOf(settings).toEqualTypeOf<{
      readonly limits: { readonly maxDepth: number };
      readonly on: boolean | undefined;
    }>();
    expect(settings).toEqual({ limits: { maxDepth: 7 }, on: undefined });
    expect(Object.isFrozen(settings) && Object.isFrozen(settings.limits)).toBe(true);
  });

  it('refuses two variables at one place, and a place that is a setting and a group at once', () => {
    expect(() =>
      placedSettings({ A: setting('x.y', text('t')), B: setting('x.y', text('t')) }, { A: 'a', B: 'b' }),
    ).toThrow('B: its place x.y is taken already');
    expect(() =>
      placedSettings({ A: setting('x', text('t')), B: setting('x.y', text('t')) }, { A: 'a', B: 'b' }),
    ).toThrow('B: its place x.y is taken already');
    expect(() =>
      placedSettings({ A: setting('x.y', text('t')), B: setting('x', text('t')) }, { A: 'a', B: 'b' }),
    ).toThrow('B: its place x is taken already');
  });
});
