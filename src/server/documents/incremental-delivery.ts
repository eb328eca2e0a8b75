import { useDeferStream } from '@graphql-yoga/plugin-defer-stream';
import { Kind, OverlappingFieldsCanBeMergedRule, visit, BREAK, type DocumentNode, type ValueNode } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import { operationStateOf } from '../request-state.js';

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
 * The one detector of incremental delivery: as an operation is validated, its state says whether
 * its document (as parsed, after APQ and trusted documents, before any rewrite) uses @defer or
 * @stream; the negotiation, the response cache and every later plugin read `incremental`.
 *
 * @defer and @stream (GraphQL over HTTP incremental delivery: multipart/mixed, or SSE): yoga's
 * executor and result processors serve them, and `schema.graphql` declares the directives
 * (src/schema/index.ts), so what yoga's plugin adds is its validation rules for them. Those are
 * added for documents that use the directives only: on every request they cost a filter and a
 * copy of the rule list (and a read of each rule's name) for nothing.
 *
 * The plugin also adds its own copy of graphql-js's field-merging rule (one that knows @stream),
 * but its attempt to drop graphql-js's rule does not reach envelop's rule list, so both would
 * run; and the copy lacks graphql-js 16.15's complexity budget (twice as slow on hostile
 * documents). The copy is taken out again, in place; graphql-js's rule stays. (A differing
 * @stream on merged fields is then not refused: execution takes the first.)
 */
export function useIncrementalDelivery(): Plugin {
  const deferStream = useDeferStream() as Plugin;
  return {
    onValidate(payload) {
      if (!usesIncrementalDelivery(payload.params.documentAST)) return;
      const operation = operationStateOf(payload.context);
      if (operation !== undefined) operation.incremental = true;
      // envelop's own list (the plugin's filter replaces only its view of it, its rules are pushed onto this one).
      const rules = payload.params.rules ?? [];
      void deferStream.onValidate?.(payload);
      payload.params.rules = rules;
      for (let i = rules.length - 1; i >= 0; i--) {
        const rule = rules[i]!;
        if (rule.name === OverlappingFieldsCanBeMergedRule.name && rule !== OverlappingFieldsCanBeMergedRule) rules.splice(i, 1);
      }
    },
    // A negative initialCount was the executor's crash (INTERNAL_SERVER_ERROR): the client's
    // mistake, refused before the plan makes a call. Read as the operation runs, its variables
    // known; a client answered in one JSON document runs without @stream (answers/negotiation.ts).
    onExecute({ args, setResultAndStopExecution }) {
      if (operationStateOf(args.contextValue)?.incremental !== true) return;
      if (negativeInitialCount(args.document, args.variableValues)) setResultAndStopExecution({ errors: [negativeCount()] });
    },
  };
}
