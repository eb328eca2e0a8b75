import SchemaBuilder from '@pothos/core';
import RelayPlugin from '@pothos/plugin-relay';
import ValidationPlugin from '@pothos/plugin-validation';
import { DateTimeResolver, JSONResolver, URLResolver, UUIDResolver } from 'graphql-scalars';
import type { GatewayContext } from '../context.js';
import { invalidInput } from './inputs.js';

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
    cursorType: 'String',
    edgesFieldOptions: { nullable: false },
    nodeFieldOptions: { nullable: false },
    nodesOnConnection: { description: 'The nodes of the edges, for clients that do not need cursors.' },
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
builder.addScalarType('JSON', JSONResolver, {});

builder.queryType({ description: 'Reads of the Avatar Head Service.' });
builder.mutationType({ description: 'Changes to heads and subscriptions, and the login flow.' });
