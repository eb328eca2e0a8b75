import { z } from 'zod';

/*
 * Where a variable goes in the settings config.ts hands down. A variable that is a setting as it
 * is parsed says so where it is declared, beside its default and range:
 * `MAX_DEPTH: setting('limits.maxDepth', integer(1, 1_000).default(15))` is `maxDepth` in the
 * group `limits`. The grouped settings, and their type, are built from those places
 * (placedSettings), so no list of fields is kept beside the environment's.
 */

// Carried in the type only (as zod's own brands are), so that the settings' type knows each place.
declare const placedAt: unique symbol;

/** A variable's schema, marked with the setting it is: its groups, then its name, dotted. */
export type Placed<Schema extends z.ZodType, Path extends string> = Schema & { readonly [placedAt]: Path };

const places = z.registry<{ readonly path: string }>();

/** Declares the variable `schema` reads to be, as parsed, the setting at `path` (`'limits.maxDepth'`). */
export function setting<const Path extends string, Schema extends z.ZodType>(
  path: Path,
  schema: Schema,
): Placed<Schema, Path> {
  places.add(schema, { path });
  return schema as Placed<Schema, Path>;
}

/** Where a variable goes in the settings; undefined for one that config.ts makes a setting of itself. */
export function placeOf(schema: z.ZodType): string | undefined {
  return places.get(schema)?.path;
}

/** Each place of the variables of `Shape`, and the type its variable is parsed to. */
type Placements<Shape> = {
  [Name in keyof Shape as Shape[Name] extends { readonly [placedAt]: infer Path extends string }
    ? Path
    : never]: z.output<Shape[Name]>;
};

/**
 * Dotted places as groups: `{ 'limits.maxDepth': number }` is `{ limits: { maxDepth: number } }`.
 * (A conditional type, so that a group reads as its fields, not as these aliases, in hovers and errors.)
 */
type Grouped<Paths> = Paths extends unknown
  ? {
      readonly [Path in keyof Paths & string as Path extends `${infer Group}.${string}`
        ? Group
        : Path]: Path extends `${infer Group}.${string}` ? Grouped<Within<Paths, Group>> : Paths[Path];
    }
  : never;

/** The places inside `Group`, without its name. */
type Within<Paths, Group extends string> = {
  [Path in keyof Paths & string as Path extends `${Group}.${infer Rest}` ? Rest : never]: Paths[Path];
};

/** The settings the variables of an environment's shape are, grouped by their places. */
export type PlacedSettings<Shape> = Grouped<Placements<Shape>>;

/**
 * The variables of `shape` that are settings, each at its place with its parsed value from
 * `values`; every group frozen. Two variables at one place, or a place inside another variable's,
 * are a mistake of the declarations, thrown.
 */
export function placedSettings<Shape extends Readonly<Record<string, z.ZodType>>>(
  shape: Shape,
  values: Readonly<Record<string, unknown>>,
): PlacedSettings<Shape> {
  const settings: Record<string, unknown> = {};
  const groups = new Set<unknown>([settings]);
  for (const [variable, schema] of Object.entries(shape)) {
    const place = placeOf(schema);
    if (place === undefined) continue;
    const taken = () =>
      new Error(`${variable}: its place ${place} is taken already, by another variable or inside one`);
    const path = place.split('.');
    const name = path.pop()!;
    let group = settings;
    for (const groupName of path) {
      if (!(groupName in group)) {
        group[groupName] = {};
        groups.add(group[groupName]);
      }
      if (!groups.has(group[groupName])) throw taken();
      group = group[groupName] as Record<string, unknown>;
    }
    if (name in group) throw taken();
    group[name] = values[variable];
  }
  for (const group of groups) Object.freeze(group);
  return settings as PlacedSettings<Shape>;
}
