import { encodeGlobalID, offsetToCursor } from '@pothos/plugin-relay';
import fc from 'fast-check';
import {
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLInterfaceType,
  type GraphQLObjectType,
  getNamedType,
  isEnumType,
  isInterfaceType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
} from 'graphql';
import { schema } from '../../src/schema/index.js';

/*
 * Query requests generated from the schema (test/differential.test.ts): documents written by
 * walking it from Query, valid ones mostly and some with one deliberate flaw each, and the HTTP
 * request around each (method, variables, operation name, token, Accept, Accept-Encoding...).
 */

type Gen = fc.GeneratorValue;

/**
 * A whole number from 0 to `max`, each as likely (fast-check's own lean to small values would skew
 * every share below). It shrinks towards 0: the first of a `pick`'s items (the plainest, so put
 * first) and no to every `chance`, so a shrunk counterexample keeps only what its failure needs.
 */
const uniform = (max: number) => fc.noBias(fc.nat({ max }));
const pick = <T>(g: Gen, items: readonly T[]): T => items[g(uniform, items.length - 1)]!;
const chance = (g: Gen, percent: number): boolean => g(uniform, 99) >= 100 - percent;

/** One deliberate mistake an invalid document carries (a valid one carries none). */
const flaws = [
  'unknown field',
  'unknown argument',
  'wrong argument literal',
  'missing required argument',
  'undefined variable',
  'variable of the wrong type',
  'unused variable',
  'unknown fragment',
  'leaf with a selection',
  'object without a selection',
  'syntax error',
] as const;
type Flaw = (typeof flaws)[number];

const unknownHeadIds = ['00000000-0000-4000-8000-000000000000', 'f0e1d2c3-b4a5-4968-8776-655443322110'];

/**
 * A request as a client sends it; `auth` says which token it carries (the demo user's is the caller's to log in for).
 */
export interface GeneratedRequest {
  readonly method: 'POST' | 'GET';
  readonly query: string;
  readonly variables?: Record<string, unknown>;
  readonly operationName?: string;
  readonly auth: 'none' | 'demo token' | 'unknown token';
  /** Undefined: fetch sends `*\/*`. */
  readonly accept?: string;
  readonly acceptEncoding: 'identity' | 'gzip' | 'br';
  /** A browser's Origin (CORS headers, where CORS_ORIGINS is set). */
  readonly origin?: string;
  /** Extensions in the body (an APQ hash, an unknown extension). */
  readonly extensions?: Record<string, unknown>;
}

/**
 * Writes one query document by walking the schema from Query: fields and their arguments (as
 * literals or declared variables), aliases, nested selections, inline and named fragments,
 * `__typename`, `@skip`/`@include` in some documents (which compiled execution leaves to the
 * interpreter), and, when it is given one, one flaw that makes the document invalid.
 */
class DocumentWriter {
  readonly fragments: string[] = [];
  readonly declarations: string[] = [];
  readonly variables: Record<string, unknown> = {};
  private names = 0;
  private pending: Flaw | undefined;
  /** A fifth of the documents carry directives; the rest may be compiled. */
  private readonly directives: boolean;

  constructor(
    private readonly g: Gen,
    /** Ids of heads the upstream holds. */
    private readonly ids: readonly string[],
    flaw: Flaw | undefined,
  ) {
    this.pending = flaw === 'syntax error' ? undefined : flaw;
    this.directives = chance(g, 20);
  }

  private fresh(prefix: string): string {
    return `${prefix}${this.names++}`;
  }

  /** The flaw, once, at about half the places it could go (and at the root if none took it). */
  private takeFlaw(...fitting: Flaw[]): Flaw | undefined {
    if (this.pending === undefined || !fitting.includes(this.pending) || !chance(this.g, 50)) return undefined;
    const flaw = this.pending;
    this.pending = undefined;
    return flaw;
  }

  // -- values --

  private headId(): string {
    const g = this.g;
    const id = pick(g, this.ids);
    return pick(g, [
      () => id,
      () => id,
      () => encodeGlobalID('Head', id),
      () => pick(g, unknownHeadIds),
      () => encodeGlobalID('Head', pick(g, unknownHeadIds)),
      () => encodeGlobalID('Permission', id),
      () => pick(g, ['not-an-id', '', id.slice(0, 8)]),
    ])();
  }

  /** A value of the argument's type, chosen by what the argument means, as JSON. */
  private value(arg: GraphQLArgument): unknown {
    const g = this.g;
    switch (arg.name) {
      case 'id':
        return this.headId();
      case 'ids':
        return Array.from({ length: g(fc.integer, { min: 0, max: 4 }) }, () => this.headId());
      case 'first':
      case 'last':
        // Small pages keep the answers small; 0 and 101 are refused by the resolver (BAD_USER_INPUT).
        return chance(g, 15) ? pick(g, [0, 101, -1, 20]) : g(fc.integer, { min: 1, max: 5 });
      case 'after':
      case 'before':
        return chance(g, 20)
          ? pick(g, ['garbage', Buffer.from('OffsetConnection:1.5').toString('base64')])
          : offsetToCursor(g(fc.integer, { min: 0, max: 270 }));
      case 'search':
        return pick(g, ['Cobalt', 'head 00', 'Zephyr', 'no such head', '']);
      case 'style':
        return pick(g, ['realistic', 'cartoon', 'ANIME', 'none', '']);
    }
    return this.plain(arg.type);
  }

  /**
   * A value of an input type with no meaning attached (not reached by today's schema, whose arguments all have one
   * above).
   */
  private plain(type: GraphQLInputType): unknown {
    const g = this.g;
    if (isNonNullType(type)) return this.plain(type.ofType);
    if (isListType(type)) return [this.plain(type.ofType)];
    if (isEnumType(type)) return pick(g, type.getValues()).name;
    const named = getNamedType(type);
    return named.name === 'Int' ? g(fc.integer, { min: 1, max: 5 }) : named.name === 'Boolean' ? g(fc.boolean) : 'text';
  }

  /** A value that does not coerce to the type: a variable's value refused before execution. */
  private wrongValue(type: GraphQLInputType): unknown {
    const g = this.g;
    if (isNonNullType(type)) return chance(g, 40) ? null : this.wrongValue(type.ofType);
    if (isListType(type)) return chance(g, 50) ? [null] : { not: 'a list' };
    const named = getNamedType(type);
    return named.name === 'Int' ? pick(g, ['ten', 1.5, 2 ** 31]) : pick(g, [true, { an: 'object' }]);
  }

  /** A GraphQL literal of a JSON value. */
  private literal(value: unknown): string {
    if (Array.isArray(value)) return `[${value.map((item) => this.literal(item)).join(', ')}]`;
    return JSON.stringify(value);
  }

  private argument(arg: GraphQLArgument): string {
    const g = this.g;
    // No argument of Query takes an input object, nor a list of lists.
    if (this.takeFlaw('wrong argument literal')) return `${arg.name}: ${pick(g, ['{ a: 1 }', '[[true]]'])}`;
    if (this.takeFlaw('undefined variable')) return `${arg.name}: $${this.fresh('undeclared')}`;
    if (!chance(g, 40)) return `${arg.name}: ${this.literal(this.value(arg))}`;
    const name = this.fresh('v');
    const flawed = this.takeFlaw('variable of the wrong type');
    // The declared type is the argument's, or (the flaw) one that does not fit it.
    const declared = flawed ? (String(arg.type) === 'String' ? 'Int' : 'Boolean') : String(arg.type);
    const withDefault = !isNonNullType(arg.type) && chance(g, 15);
    this.declarations.push(`$${name}: ${declared}${withDefault ? ` = ${this.literal(this.value(arg))}` : ''}`);
    // Its value: fitting mostly, sometimes one that does not coerce or none for a required one.
    const roll = g(uniform, 99);
    if (roll >= 92) this.variables[name] = this.wrongValue(arg.type);
    else if (roll >= 88 && isNonNullType(arg.type)) {
      // Left out: "Variable "$v" of required type was not provided".
    } else if (!(withDefault && roll >= 50)) this.variables[name] = this.value(arg);
    return `${arg.name}: $${name}`;
  }

  private directive(): string {
    const g = this.g;
    if (!this.directives || !chance(g, 30)) return '';
    const which = pick(g, ['skip', 'include']);
    if (!chance(g, 50)) return ` @${which}(if: ${pick(g, ['true', 'false'])})`;
    const name = this.fresh('b');
    this.declarations.push(`$${name}: Boolean!`);
    this.variables[name] = g(fc.boolean);
    return ` @${which}(if: $${name})`;
  }

  // -- selections --

  private field(field: GraphQLField<unknown, unknown>, depth: number, alias?: string): string {
    const g = this.g;
    let text =
      alias !== undefined
        ? `${alias}: ${field.name}`
        : chance(g, 15)
          ? `${this.fresh('a')}: ${field.name}`
          : field.name;
    // The flaw of a missing argument goes only where one is required.
    const missing = field.args.some((arg) => isNonNullType(arg.type))
      ? this.takeFlaw('missing required argument')
      : undefined;
    const args = field.args
      .filter((arg) => (isNonNullType(arg.type) ? missing === undefined : chance(g, 45)))
      .map((arg) => this.argument(arg));
    if (this.takeFlaw('unknown argument')) args.push('colour: 1');
    if (args.length > 0) text += `(${args.join(', ')})`;
    text += this.directive();
    const named = getNamedType(field.type);
    if (isObjectType(named) || isInterfaceType(named)) {
      if (this.takeFlaw('object without a selection')) return text;
      return `${text} ${this.selection(named, depth + 1)}`;
    }
    if (this.takeFlaw('leaf with a selection')) return `${text} { id }`;
    return text;
  }

  private selection(type: GraphQLObjectType | GraphQLInterfaceType, depth: number): string {
    const g = this.g;
    const all = Object.values(type.getFields());
    // Deep down, leaves only: the documents stay small enough to be compiled (COMPILED_EXECUTION_MAX_FIELDS).
    const fields = depth >= 5 ? all.filter((field) => isLeafType(getNamedType(field.type))) : all;
    // Indexes, not the fields: fc.gen compares its arguments, and a field leads to the whole schema.
    const chosen = g(fc.shuffledSubarray, [...fields.keys()], {
      minLength: isInterfaceType(type) ? 0 : 1,
      maxLength: Math.min(4, fields.length),
    });
    const parts = chosen.map((index) => this.field(fields[index]!, depth));
    if (parts.length === 0 || chance(g, 15))
      parts.push(chance(g, 20) ? `${this.fresh('t')}: __typename` : '__typename');
    if (this.takeFlaw('unknown field')) parts.push(pick(g, ['doesNotExist', 'token', 'head_id']));
    if (this.takeFlaw('unknown fragment')) parts.push('...Missing');
    if (depth < 5 && (isInterfaceType(type) || chance(g, 15))) {
      const target = isInterfaceType(type) ? pick(g, schema.getPossibleTypes(type)) : type;
      const inner = this.selection(target, depth + 1);
      const directive = this.directive();
      if (!chance(g, 50)) parts.push(`... on ${target.name}${directive} ${inner}`);
      else {
        const name = this.fresh('F');
        this.fragments.push(`fragment ${name} on ${target.name} ${inner}`);
        parts.push(`...${name}${directive}`);
      }
    }
    return `{ ${g(fc.shuffledSubarray, parts, { minLength: parts.length, maxLength: parts.length }).join(' ')} }`;
  }

  /** Whatever flaw no place took, at the root. */
  private rootFlaw(): string | undefined {
    const flaw = this.pending;
    this.pending = undefined;
    switch (flaw) {
      case undefined:
        return undefined;
      case 'unknown field':
        return 'doesNotExist';
      case 'unknown argument':
        return `head(id: "${pick(this.g, this.ids)}", colour: 1) { name }`;
      case 'wrong argument literal':
        return 'heads(first: "ten") { totalCount }';
      case 'missing required argument':
        return 'head { name }';
      case 'undefined variable':
        return `head(id: $${this.fresh('undeclared')}) { name }`;
      case 'variable of the wrong type': {
        const name = this.fresh('v');
        this.declarations.push(`$${name}: String`);
        this.variables[name] = 'ten';
        return `heads(first: $${name}) { totalCount }`;
      }
      case 'unused variable':
        this.declarations.push(`$${this.fresh('unused')}: Int`);
        return undefined;
      case 'unknown fragment':
        return '...Missing';
      case 'leaf with a selection':
        return '__typename { id }';
      case 'object without a selection':
        return `head(id: "${pick(this.g, this.ids)}")`;
      case 'syntax error':
        return undefined;
    }
  }

  /** The operation's text (its name, if any, given) and its fragments. */
  document(name: string | undefined): string {
    const g = this.g;
    const roots = Object.values(schema.getQueryType()!.getFields());
    // One root field half the time (a non-null root field beside others is never compiled), up to three.
    const count = Math.max(1, g(fc.integer, { min: 0, max: 3 }));
    // Root fields under aliases of their own after the first: the same field with other arguments would conflict.
    const parts = Array.from({ length: count }, (_, i) =>
      this.field(pick(g, roots), 1, i === 0 ? undefined : this.fresh('r')),
    );
    const flawed = this.rootFlaw();
    if (flawed !== undefined) parts.push(flawed);
    const declarations = this.declarations.length > 0 ? `(${this.declarations.join(', ')})` : '';
    const head =
      name === undefined && declarations === '' && chance(g, 30)
        ? ''
        : `query${name === undefined ? '' : ` ${name}`}${declarations} `;
    return [`${head}{ ${parts.join(' ')} }`, ...this.fragments].join('\n');
  }
}

/** A document damaged as a hand might: cut short, or a stray character put in. */
function damaged(g: Gen, text: string): string {
  const at = g(fc.integer, { min: 0, max: text.length });
  return chance(g, 40)
    ? text.slice(0, at)
    : `${text.slice(0, at)}${pick(g, ['{', '}', '(', ':', '$', '"', '...', '@', '!'])}${text.slice(at)}`;
}

/**
 * Accept headers: none ("absent": fetch sends its `*\/*`), each JSON type alone and both, with
 * q-values, and one the gateway answers in no type of (406).
 */
const accepts = [
  undefined,
  'application/json',
  'application/graphql-response+json',
  'application/graphql-response+json, application/json',
  'application/json;q=0.9, application/graphql-response+json',
  'text/html',
] as const;

/**
 * Requests generated from the schema, over the heads `ids` names (and others), in the shapes clients
 * send them: POST and GET, Accept headers with q-values or none the gateway answers in, an Origin,
 * extensions.
 */
export const generatedRequests = (ids: readonly string[]): fc.Arbitrary<GeneratedRequest> =>
  fc.gen().map((g): GeneratedRequest => {
    // Four in five documents valid: most reach execution and the upstream.
    const flaw = chance(g, 20) ? pick(g, flaws) : undefined;
    const writer = new DocumentWriter(g, ids, flaw);
    const name = chance(g, 40) ? pick(g, ['Differential', 'HeadsAndMore', 'Q']) : undefined;
    let query = writer.document(name);
    let operationName = name !== undefined && chance(g, 60) ? name : undefined;
    if (name !== undefined && chance(g, 10)) {
      // Two operations: one is chosen by name (or none, an error); never compiled.
      query += '\nquery Other { __typename }';
      operationName = pick(g, [name, 'Other', undefined]);
    } else if (chance(g, 3)) operationName = 'NotInTheDocument';
    if (flaw === 'syntax error') query = damaged(g, query);
    const variables = Object.keys(writer.variables).length > 0 || chance(g, 20) ? writer.variables : undefined;
    const accept = chance(g, 12) ? pick(g, accepts.slice(4)) : pick(g, accepts.slice(0, 4));
    return {
      method: chance(g, 8) ? 'GET' : 'POST',
      query,
      ...(variables === undefined ? {} : { variables }),
      ...(operationName === undefined ? {} : { operationName }),
      auth: pick(g, ['none', 'none', 'demo token', 'demo token', 'unknown token'] as const),
      ...(accept === undefined ? {} : { accept }),
      acceptEncoding: pick(g, ['identity', 'identity', 'gzip', 'br'] as const),
      ...(chance(g, 6) ? { origin: 'https://app.example' } : {}),
      ...(chance(g, 6) ? { extensions: { clientLibrary: { name: 'differential', version: '1' } } } : {}),
    };
  });
