import SchemaBuilder from '@pothos/core';
import RelayPlugin from '@pothos/plugin-relay';
import ValidationPlugin from '@pothos/plugin-validation';
import { DateTimeResolver, JSONResolver, URLResolver, UUIDResolver } from 'graphql-scalars';
import { MAX_PAGE_SIZE } from '../domain/pages.js';
import { items } from '../plan/facts.js';
import type { GatewayContext } from './context.js';
import { boundedJson, invalidInput, literalWithinDepth } from './inputs.js';

/** How graphql-scalars' DateTime writes a timestamp (`Date#toISOString` of years 0 to 9999). */
const canonicalTimestamp = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/**
 * An http(s) URL that graphql-scalars' URL (`new URL(value).toString()`) gives back unchanged: a
 * lower-case scheme and host, the host's labels of letters, digits and hyphens, its last one
 * starting with a letter (never read as an IPv4 address), none punycode (`xn--`, which the parser
 * checks); no port, user or fragment; a path and a query of characters the parser never encodes,
 * with no dot segment (`.`, `..`, `%2e`) for it to resolve.
 */
const canonicalUrl =
  /^https?:\/\/(?:(?!xn--)[a-z0-9-]+\.)*(?!xn--)[a-z][a-z0-9-]*(?:\/[\w\-.~!$&'()*+,;=:@%]*)+(?:\?[\w\-.~!$&()*+,;=:@/?%]*)?$/;
const dotSegment = /\/(?:\.|%2e){1,2}(?:[/?]|$)/i;

export const builder = new SchemaBuilder<{
  Context: GatewayContext;
  Scalars: {
    UUID: { Input: string; Output: string };
    DateTime: { Input: Date; Output: string | Date };
    URL: { Input: URL; Output: string | URL };
    JSON: { Input: unknown; Output: unknown };
  };
  DefaultFieldNullability: false;
  DefaultEdgesNullability: false;
  DefaultNodeNullability: false;
}>({
  plugins: [RelayPlugin, ValidationPlugin],
  // Non-null unless a field says otherwise: the contract's required fields stay required.
  defaultFieldNullability: false,
  relay: {
    clientMutationId: 'omit',
    idFieldOptions: { description: 'Globally unique ID (Relay).' },
    cursorType: 'String',
    edgesFieldOptions: {
      nullable: false,
      description: 'The items of this page, each with its cursor.',
      ...items('window'),
    },
    nodeFieldOptions: { nullable: false, description: 'The item.' },
    cursorFieldOptions: { description: 'Opaque cursor of this item, for `after`/`before`.' },
    nodesOnConnection: {
      description: 'The items of this page, for clients that do not need cursors.',
      ...items('window'),
    },
    pageInfoFieldOptions: { description: 'Where this page sits in the whole listing.' },
    hasNextPageFieldOptions: { description: 'Whether items follow this page.' },
    hasPreviousPageFieldOptions: { description: 'Whether items precede this page.' },
    startCursorFieldOptions: { description: 'Cursor of the first item of this page; null when the page is empty.' },
    endCursorFieldOptions: { description: 'Cursor of the last item of this page; null when the page is empty.' },
    firstArgOptions: {
      description: `Page forwards: how many items (1 to ${MAX_PAGE_SIZE}) after \`after\`, or from the start.`,
    },
    afterArgOptions: { description: 'Cursor after which the page starts.' },
    lastArgOptions: {
      description: `Page backwards: how many items (1 to ${MAX_PAGE_SIZE}) before \`before\`, or up to the end.`,
    },
    beforeArgOptions: { description: 'Cursor before which the page ends.' },
    nodeTypeOptions: { description: 'An object with a globally unique ID, refetchable through `node(id:)`.' },
    pageInfoTypeOptions: { description: 'Where a page of a connection sits in the whole listing.' },
    // node/nodes are defined in node.ts, with the gateway's own ID validation.
    nodeQueryOptions: false,
    nodesQueryOptions: false,
  },
  validation: {
    validationError: (failure) => invalidInput(failure.issues),
  },
});

builder.addScalarType('UUID', UUIDResolver, {});
builder.addScalarType('DateTime', DateTimeResolver, {
  // A timestamp already in the form graphql-scalars answers (UTC, milliseconds, `Z`) is answered as
  // it is: every one comes from an upstream body whose check (upstream/schemas.ts) has refused any
  // date that does not exist. Anything else goes through graphql-scalars, which normalises it to
  // that form. Its way (check, parse into a Date, which JSON.stringify then turns back into this
  // string) cost some 2 µs a field.
  serialize: (value) =>
    typeof value === 'string' && canonicalTimestamp.test(value) ? value : DateTimeResolver.serialize(value),
});
builder.addScalarType('URL', URLResolver, {
  // An asset address already as the URL parser writes it is answered as it came (it is some 1 µs a
  // field in place to parse and write it again: a hundred on a page of heads with their hair).
  serialize: (value) =>
    typeof value === 'string' && canonicalUrl.test(value) && !dotSegment.test(value)
      ? value
      : (URLResolver.serialize(value) as string),
});
// JSON inputs bounded in depth and size before anything walks them (inputs.ts); a literal is
// checked for depth before graphql-scalars' recursive parseLiteral runs.
builder.addScalarType('JSON', JSONResolver, {
  parseValue: (value) => boundedJson(JSONResolver.parseValue(value)),
  parseLiteral: (ast, variables) => boundedJson(JSONResolver.parseLiteral(literalWithinDepth(ast), variables)),
});

builder.queryType({ description: 'Reads of the Avatar Head Service.' });
builder.mutationType({ description: 'Changes to heads and subscriptions, and the login flow.' });
