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
  OperationTypeNode,
  type ValidationContext,
  type ValueNode,
  visit,
} from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import type { OperationStep } from '../pipeline/stages.js';

const incremental = (node: DirectiveNode) => node.name.value === 'defer' || node.name.value === 'stream';

function perDocument<T>(compute: (document: DocumentNode) => T): (document: DocumentNode) => T {
  const kept = new WeakMap<DocumentNode, T>();
  return (document) => {
    if (!kept.has(document)) kept.set(document, compute(document));
    return kept.get(document)!;
  };
}

export const usesIncrementalDelivery = perDocument((document): boolean => {
  let uses = false;
  visit(document, {
    Directive(node) {
      if (!incremental(node)) return undefined;
      uses = true;
      return BREAK;
    },
  });
  return uses;
});

/** The document without @defer and @stream, for a one-JSON client (the spec lets a server ignore both). */
export const withoutIncrementalDelivery = perDocument(
  (document): DocumentNode => visit(document, { Directive: (node) => (incremental(node) ? null : undefined) }),
);

/** Whether a @stream asks for an `initialCount` below 0: as written, or through a variable (sent, or its default). */
function negativeInitialCount(document: DocumentNode, variables: Readonly<Record<string, unknown>> | null | undefined) {
  let negative = false;
  const defaults = new Map<string, ValueNode>();
  const literal = (value: ValueNode | undefined): unknown => {
    if (value?.kind === Kind.INT) return Number(value.value);
    if (value?.kind !== Kind.VARIABLE) return undefined;
    const name = value.name.value;
    return variables != null && Object.hasOwn(variables, name) ? variables[name] : literal(defaults.get(name));
  };
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

const report = (context: ValidationContext, message: string, nodes: DirectiveNode | DirectiveNode[]) =>
  context.reportError(new GraphQLError(message, { nodes }));

/** @defer's and @stream's labels: static, each used once (yoga's DeferStreamDirectiveLabelRule, graphql-js 17's). */
function labelRule(context: ValidationContext): ASTVisitor {
  const known = new Map<string, DirectiveNode>();
  return {
    Directive(node) {
      if (!incremental(node)) return;
      const label = node.arguments?.find((argument) => argument.name.value === 'label')?.value;
      if (label === undefined) return;
      if (label.kind !== Kind.STRING)
        report(context, `Directive "${node.name.value}"'s label argument must be a static string.`, node);
      else if (known.has(label.value))
        report(context, 'Defer/Stream directive label argument must be unique.', [known.get(label.value)!, node]);
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
      const root = [OperationTypeNode.MUTATION, OperationTypeNode.SUBSCRIPTION].find(
        (type) => parent === context.getSchema().getRootType(type),
      );
      if (root !== undefined)
        report(context, `${directive} directive cannot be used on root ${root} type "${parent.name}".`, node);
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
      if (isListType(getNullableType(field.type))) return;
      const message = `Stream directive cannot be used on non-list field "${field.name}" on type "${parent.name}".`;
      report(context, message, node);
    },
  };
}

/**
 * yoga's plugin-defer-stream's three rules, same words (test/plugin-conformance.test.ts), not its field-merging copy:
 * lacking graphql-js 16.15's complexity budget, it was twice as slow on hostile documents (merged @stream: first wins).
 */
export const incrementalDeliveryRules: EnvelopPlugin = {
  onValidate({ params, addValidationRule }) {
    if (!usesIncrementalDelivery(params.documentAST)) return;
    addValidationRule(labelRule);
    addValidationRule(rootFieldRule);
    addValidationRule(streamOnListRule);
  },
};

/** A negative initialCount crashed the executor: the client's mistake, refused before the plan makes a call. */
export const streamInitialCount: OperationStep = (operation) => {
  if (operation.prepared?.incremental !== true || operation.document === undefined) return undefined;
  if (!negativeInitialCount(operation.document, operation.params.variables)) return undefined;
  return createGraphQLError(
    '@stream(initialCount:) must be 0 or more: the number of list items sent before the rest streams.',
    { extensions: { code: 'BAD_USER_INPUT' } },
  );
};
