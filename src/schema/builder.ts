import SchemaBuilder from '@pothos/core';
import RelayPlugin from '@pothos/plugin-relay';
import ValidationPlugin from '@pothos/plugin-validation';
import { DateTimeResolver, JSONResolver, URLResolver, UUIDResolver } from 'graphql-scalars';
import type { GatewayContext } from '../context.js';
import { boundedJson, invalidInput, literalWithinDepth } from './inputs.js';

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
    edgesFieldOptions: { nullable: false, description: 'The items of this page, each with its cursor.' },
    nodeFieldOptions: { nullable: false, description: 'The item.' },
    cursorFieldOptions: { description: 'Opaque cursor of this item, for `after`/`before`.' },
    nodesOnConnection: { description: 'The items of this page, for clients that do not need cursors.' },
    pageInfoFieldOptions: { description: 'Where this page sits in the whole listing.' },
    hasNextPageFieldOptions: { description: 'Whether items follow this page.' },
    hasPreviousPageFieldOptions: { description: 'Whether items precede this page.' },
    startCursorFieldOptions: { description: 'Cursor of the first item of this page; null when the page is empty.' },
    endCursorFieldOptions: { description: 'Cursor of the last item of this page; null when the page is empty.' },
    firstArgOptions: { description: 'Page forwards: how many items (1 to 100) after `after`, or from the start.' },
    afterArgOptions: { description: 'Cursor after which the page starts.' },
    lastArgOptions: { description: 'Page backwards: how many items (1 to 100) before `before`, or up to the end.' },
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
builder.addScalarType('DateTime', DateTimeResolver, {});
builder.addScalarType('URL', URLResolver, {});
// JSON inputs bounded in depth and size before anything walks them (inputs.ts); a literal is
// checked for depth before graphql-scalars' recursive parseLiteral runs.
builder.addScalarType('JSON', JSONResolver, {
  parseValue: (value) => boundedJson(JSONResolver.parseValue(value)),
  parseLiteral: (ast, variables) => boundedJson(JSONResolver.parseLiteral(literalWithinDepth(ast), variables)),
});

builder.queryType({ description: 'Reads of the Avatar Head Service.' });
builder.mutationType({ description: 'Changes to heads and subscriptions, and the login flow.' });
