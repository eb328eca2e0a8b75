import { Ajv, type ValidateFunction } from 'ajv';
import { z } from 'zod';
import { utcOffsetKeyword, withUtcOffset } from './schemas.js';

/*
 * An upstream body checked against its zod schema (the contract's shapes, whose types every reader
 * uses) by a validator that ajv compiles once per schema from that schema's JSON Schema. zod's own
 * parse copies every object it checks: on a 50-head page it cost as much CPU as JSON.parse of the
 * body (~115 µs); ajv checks the parsed body in place (~30 µs).
 *
 * zod stays the judge. The JSON Schema says what zod checks or more (a regex flag such as `i` is
 * dropped, so `HTTPS://` fails it), and a body ajv refuses is parsed by zod, whose answer (the data,
 * or the issues that describe the fault) is the one returned. So a body passes exactly when zod
 * passes it, with the same data; test/body-check.test.ts holds the two together.
 */

// `unicode: false`: lengths in UTF-16 units, as zod counts them (ajv's default counts code points,
// which would pass a name zod refuses); `logger: false` silences its notice that the option is old.
const ajv = new Ajv({
  strict: false,
  allErrors: false,
  validateFormats: false,
  unicode: false,
  unicodeRegExp: false,
  logger: false,
});

/**
 * Timestamps to give a `Z` once the whole body has passed: applied only then, so a body refused on
 * a later field reaches zod as it came.
 */
const timestampsWithoutOffset: { parent: Record<string | number, string>; key: string | number }[] = [];

ajv.addKeyword({
  keyword: utcOffsetKeyword,
  schemaType: 'boolean',
  validate: (
    _schema: boolean,
    value: unknown,
    _parentSchema: unknown,
    data?: { parentData: unknown; parentDataProperty: string | number },
  ) => {
    if (typeof value === 'string' && data !== undefined && withUtcOffset(value) !== value) {
      timestampsWithoutOffset.push({
        parent: data.parentData as Record<string | number, string>,
        key: data.parentDataProperty,
      });
    }
    return true;
  },
});

const validators = new WeakMap<z.ZodType, ValidateFunction>();

function validatorOf(schema: z.ZodType): ValidateFunction {
  let validate = validators.get(schema);
  if (validate === undefined) {
    const jsonSchema = z.toJSONSchema(schema, { target: 'draft-7', io: 'input', unrepresentable: 'any' });
    refuseEmptySchemas(jsonSchema);
    validate = ajv.compile(jsonSchema);
    validators.set(schema, validate);
  }
  return validate;
}

/**
 * What JSON Schema cannot say (a custom check) comes out as `{}`, which would let through what zod
 * refuses: such a schema must carry its JSON Schema in `meta()`.
 */
function refuseEmptySchemas(schema: object, at = '#'): void {
  const entries = Object.entries(schema);
  if (entries.length === 0) throw new Error(`${at} has no JSON Schema: give it one in meta()`);
  for (const [keyword, value] of entries) {
    if (keyword === 'properties')
      for (const [name, property] of Object.entries(value as object))
        refuseEmptySchemas(property as object, `${at}/properties/${name}`);
    else if ((keyword === 'items' || keyword === 'additionalProperties') && typeof value === 'object')
      refuseEmptySchemas(value as object, `${at}/${keyword}`);
    else if (keyword === 'anyOf' || keyword === 'oneOf' || keyword === 'allOf')
      for (const [i, member] of (value as object[]).entries()) refuseEmptySchemas(member, `${at}/${keyword}/${i}`);
  }
}

/** The body as zod would parse it: its data (timestamps given their `Z`), or zod's issues. */
export function checkBody<T>(schema: z.ZodType<T>, body: unknown): z.ZodSafeParseResult<T> {
  try {
    if (!validatorOf(schema)(body)) return schema.safeParse(body);
    for (const { parent, key } of timestampsWithoutOffset) parent[key] = withUtcOffset(parent[key]!);
    return { success: true, data: body as T };
  } finally {
    // Emptied at once: a long-lived array must not keep a body's objects until the next check.
    timestampsWithoutOffset.length = 0;
  }
}
