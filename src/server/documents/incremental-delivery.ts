import { useDeferStream } from '@graphql-yoga/plugin-defer-stream';
import { Kind, OverlappingFieldsCanBeMergedRule, visit, BREAK, type DocumentNode, type ValueNode } from 'graphql';
import type { Plugin as EnvelopPlugin } from '@envelop/core';
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

const whole = new WeakMap<DocumentNode, DocumentNode>();

/**
 * The document without its @defer and @stream (kept per document): what a client that takes one
 * JSON answer is served, every field in it. The spec lets a server ignore both directives, and
 * without them the plan reads the deferred fields with the rest.
 */
export function withoutIncrementalDelivery(document: DocumentNode): DocumentNode {
  let plain = whole.get(document);
  if (plain === undefined) {
    plain = visit(document, {
      Directive: (node) => (node.name.value === 'defer' || node.name.value === 'stream' ? null : undefined),
    });
    whole.set(document, plain);
  }
  return plain;
}

/** Whether a @stream of the document asks for an `initialCount` below 0: as written, or through a variable (sent, or its default). */
function negativeInitialCount(document: DocumentNode, variables: Readonly<Record<string, unknown>> | null | undefined): boolean {
  let negative = false;
  const defaults = new Map<string, ValueNode>();
  const valueOf = (value: ValueNode | undefined): unknown =>
    value?.kind === Kind.INT
      ? Number(value.value)
      : value?.kind === Kind.VARIABLE
        ? variables != null && Object.hasOwn(variables, value.name.value)
          ? variables[value.name.value]
          : valueOf(defaults.get(value.name.value))
        : undefined;
  visit(document, {
    VariableDefinition(node) {
      if (node.defaultValue !== undefined) defaults.set(node.variable.name.value, node.defaultValue);
    },
    Directive(node) {
      if (node.name.value !== 'stream') return undefined;
      const count = valueOf(node.arguments?.find((argument) => argument.name.value === 'initialCount')?.value);
      if (typeof count !== 'number' || count >= 0) return undefined;
      negative = true;
      return BREAK;
    },
  });
  return negative;
}

const negativeCount = () =>
  createGraphQLError('@stream(initialCount:) must be 0 or more: the number of list items sent before the rest streams.', { extensions: { code: 'BAD_USER_INPUT' } });

/**
 * @defer and @stream (GraphQL over HTTP incremental delivery: multipart/mixed, or SSE): the
 * executor serves them and `schema.graphql` declares the directives (src/schema/index.ts), so what
 * yoga's plugin adds is its validation rules for them, here a document policy (run as a document
 * is validated, once: documents/prepared.ts). They are added for documents that use the
 * directives only (`usesIncrementalDelivery`, the one detector, which the prepared document's
 * `incremental` reads).
 *
 * The plugin also adds its own copy of graphql-js's field-merging rule (one that knows @stream),
 * but its attempt to drop graphql-js's rule does not reach envelop's rule list, so both would
 * run; and the copy lacks graphql-js 16.15's complexity budget (twice as slow on hostile
 * documents). The copy is taken out again, in place; graphql-js's rule stays. (A differing
 * @stream on merged fields is then not refused: execution takes the first.)
 */
export function incrementalDeliveryRules(): EnvelopPlugin {
  const deferStream = useDeferStream() as EnvelopPlugin;
  return {
    onValidate(payload) {
      if (!usesIncrementalDelivery(payload.params.documentAST)) return;
      // envelop's own list (the plugin's filter replaces only its view of it, its rules are pushed onto this one).
      const rules = payload.params.rules ?? [];
      void deferStream.onValidate?.(payload);
      payload.params.rules = rules;
      for (let i = rules.length - 1; i >= 0; i--) {
        const rule = rules[i]!;
        if (rule.name === OverlappingFieldsCanBeMergedRule.name && rule !== OverlappingFieldsCanBeMergedRule) rules.splice(i, 1);
      }
    },
  };
}

/**
 * A negative initialCount was the executor's crash (INTERNAL_SERVER_ERROR): the client's mistake,
 * refused in the document stage, its variables known, before the plan makes a call (a client
 * answered in one JSON document runs without @stream: answers/negotiation.ts).
 */
export const streamInitialCount: OperationStep = (operation) => {
  if (operation.prepared?.incremental !== true || operation.document === undefined) return undefined;
  return negativeInitialCount(operation.document, operation.params.variables) ? negativeCount() : undefined;
};
