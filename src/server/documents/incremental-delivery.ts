import type { Plugin as EnvelopPlugin } from '@envelop/core';
import {
  type ASTVisitor,
  BREAK,
  type DirectiveNode,
  type DocumentNode,
  GraphQLError,
  getNullableType,
  isListType,
  Kind,
  type ValidationContext,
  type ValueNode,
  visit,
} from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import type { OperationStep } from '../pipeline/stages.js';

const seen = new WeakMap<DocumentNode, boolean>();

/** Whether a document uses @defer or @stream anywhere (kept per document). */
export function usesIncrementalDelivery(document: DocumentNode): boolean {
  let uses = seen.get(document);
  if (uses === undefined) {
    uses = false;
    visit(document, {
      Directive(node) {
        if (node.name.value !== 'defer' && node.name.value !== 'stream') return undefined;
        uses = true;
        return BREAK;
      },
    });
    seen.set(document, uses);
  }
  return uses;
}

const plainDocuments = new WeakMap<DocumentNode, DocumentNode>();

/**
 * The document without its @defer and @stream (kept per document): what a client that takes one
 * JSON answer is served, every field in it. The spec lets a server ignore both directives, and
 * without them the plan reads the deferred fields with the rest.
 */
export function withoutIncrementalDelivery(document: DocumentNode): DocumentNode {
  let plain = plainDocuments.get(document);
  if (plain === undefined) {
    plain = visit(document, {
      Directive: (node) => (node.name.value === 'defer' || node.name.value === 'stream' ? null : undefined),
    });
    plainDocuments.set(document, plain);
  }
  return plain;
}

/**
 * Whether a @stream of the document asks for an `initialCount` below 0: as written, or through a variable (sent, or its
 * default).
 */
function negativeInitialCount(
  document: DocumentNode,
  variables: Readonly<Record<string, unknown>> | null | undefined,
): boolean {
  let negative = false;
  const defaults = new Map<string, ValueNode>();
  const literal = (value: ValueNode | undefined): unknown =>
    value?.kind === Kind.INT
      ? Number(value.value)
      : value?.kind === Kind.VARIABLE
        ? variables != null && Object.hasOwn(variables, value.name.value)
          ? variables[value.name.value]
          : literal(defaults.get(value.name.value))
        : undefined;
  visit(document, {
    VariableDefinition(node) {
      if (node.defaultValue !== undefined) defaults.set(node.variable.name.value, node.defaultValue);
    },
    Directive(node) {
      if (node.name.value !== 'stream') return undefined;
      const count = literal(node.arguments?.find((argument) => argument.name.value === 'initialCount')?.value);
      if (typeof count !== 'number' || count >= 0) return undefined;
      negative = true;
      return BREAK;
    },
  });
  return negative;
}

const negativeCount = () =>
  createGraphQLError(
    '@stream(initialCount:) must be 0 or more: the number of list items sent before the rest streams.',
    { extensions: { code: 'BAD_USER_INPUT' } },
  );

/**
 * @defer's and @stream's labels: static strings, each used once (yoga's DeferStreamDirectiveLabelRule, graphql-js
 * 17's).
 */
function labelRule(context: ValidationContext): ASTVisitor {
  const known = new Map<string, DirectiveNode>();
  return {
    Directive(node) {
      if (node.name.value !== 'defer' && node.name.value !== 'stream') return;
      const label = node.arguments?.find((argument) => argument.name.value === 'label')?.value;
      if (label === undefined) return;
      if (label.kind !== Kind.STRING)
        context.reportError(
          new GraphQLError(`Directive "${node.name.value}"'s label argument must be a static string.`, { nodes: node }),
        );
      else if (known.has(label.value))
        context.reportError(
          new GraphQLError('Defer/Stream directive label argument must be unique.', {
            nodes: [known.get(label.value)!, node],
          }),
        );
      else known.set(label.value, node);
    },
  };
}

/** Neither on a root field of a mutation or a subscription (yoga's DeferStreamDirectiveOnRootFieldRule). */
function rootFieldRule(context: ValidationContext): ASTVisitor {
  return {
    Directive(node) {
      const directive = node.name.value === 'defer' ? 'Defer' : node.name.value === 'stream' ? 'Stream' : undefined;
      const parent = context.getParentType();
      if (directive === undefined || parent == null) return;
      const schema = context.getSchema();
      const root =
        parent === schema.getMutationType()
          ? 'mutation'
          : parent === schema.getSubscriptionType()
            ? 'subscription'
            : undefined;
      if (root !== undefined)
        context.reportError(
          new GraphQLError(`${directive} directive cannot be used on root ${root} type "${parent.name}".`, {
            nodes: node,
          }),
        );
    },
  };
}

/** @stream on list fields only (yoga's StreamDirectiveOnListFieldRule). */
function streamOnListRule(context: ValidationContext): ASTVisitor {
  return {
    Directive(node) {
      const field = context.getFieldDef();
      const parent = context.getParentType();
      if (node.name.value !== 'stream' || field == null || parent == null) return;
      if (!isListType(getNullableType(field.type)))
        context.reportError(
          new GraphQLError(
            `Stream directive cannot be used on non-list field "${field.name}" on type "${parent.name}".`,
            { nodes: node },
          ),
        );
    },
  };
}

/**
 * @defer and @stream (GraphQL over HTTP incremental delivery: multipart/mixed, or SSE): the
 * executor serves them and `schema.graphql` declares the directives (src/schema/index.ts); what
 * is checked of them is three validation rules, a document policy (run as a document is validated,
 * once: documents/prepared.ts), for documents that use the directives only
 * (`usesIncrementalDelivery`, the one detector, which the prepared document's `incremental` reads).
 * yoga's plugin (@graphql-yoga/plugin-defer-stream) added the same three with the same words, which
 * its conformance test holds (test/plugin-conformance.test.ts), and a copy of graphql-js's
 * field-merging rule that knows @stream but lacks graphql-js 16.15's complexity budget (twice as
 * slow on hostile documents): graphql-js's rule stays, so a differing @stream on merged fields is
 * not refused (execution takes the first).
 */
export const incrementalDeliveryRules: EnvelopPlugin = {
  onValidate({ params, addValidationRule }) {
    if (!usesIncrementalDelivery(params.documentAST)) return;
    addValidationRule(labelRule);
    addValidationRule(rootFieldRule);
    addValidationRule(streamOnListRule);
  },
};

/**
 * A negative initialCount was the executor's crash (INTERNAL_SERVER_ERROR): the client's mistake,
 * refused in the document stage, its variables known, before the plan makes a call (a client
 * answered in one JSON document runs without @stream: answers/negotiation.ts).
 */
export const streamInitialCount: OperationStep = (operation) => {
  if (operation.prepared?.incremental !== true || operation.document === undefined) return undefined;
  return negativeInitialCount(operation.document, operation.params.variables) ? negativeCount() : undefined;
};
