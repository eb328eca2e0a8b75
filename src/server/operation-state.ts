import type { DocumentNode, OperationDefinitionNode } from 'graphql';
import type { HeadChange } from '../domain/head-changes.js';
import type { OperationPlan } from '../plan/operation-plan.js';
import type { GatewayContext } from '../schema/context.js';
import type {
  FieldEvictions,
  OperationParams,
  OperationRecord,
  OperationResult,
  OperationType,
  PreparedDocument,
  RequestState,
} from './request-state.js';

/** A subscription's event: the change its operation runs on (real-time/event-resolutions.ts). */
export interface SubscriptionEvent {
  readonly change: HeadChange;
}

/** An APQ registration waiting for its document to validate (documents/persisted-documents.ts). */
export interface Registration {
  readonly hash: string;
  readonly query: string;
}

/** A context names its operation in a property: a WeakMap's entries kept each request's objects past a scavenge. */
const operationKey = Symbol('operation');

/** The operation a context was made for: envelop's plugins (the response cache's) are handed the context alone. */
export const operationOf = (context: unknown): OperationState | undefined =>
  (context as { [operationKey]?: OperationState } | null)?.[operationKey];

/** What the document stage writes (a subscription's event enters with its subscription's). */
export interface PreparedOperation {
  readonly prepared: PreparedDocument;
  readonly document: DocumentNode;
  readonly definition: OperationDefinitionNode;
}

/** An operation past the document stage, as the admission, plan and execution stages are given it (`isPrepared`). */
export type PreparedOperationState = OperationState & PreparedOperation;

/** Whether the document stage prepared the operation's document and selected its operation. */
export const isPrepared = (operation: OperationState): operation is PreparedOperationState =>
  operation.prepared !== undefined && operation.document !== undefined && operation.definition !== undefined;

/** One GraphQL operation: made as its request's parameters are read, read and written by every stage after. */
export class OperationState {
  /** The operation's outcome: set by execution, or by a step that answers it instead (a refusal, a kept answer). */
  result: OperationResult | undefined;
  /** Its span, log line and metrics; set by the telemetry as its document stage begins. */
  record: OperationRecord | undefined;
  /** Its document, once prepared (parsed and validated); the document it runs may differ (`document`). */
  prepared: PreparedDocument | undefined;
  /** The document it runs: the prepared one, or that without @defer/@stream for a client that takes one JSON answer. */
  document: DocumentNode | undefined;
  /** The operation the document's operationName selects. */
  definition: OperationDefinitionNode | undefined;
  /** Its upstream plan, made in the plan stage (documents/upstream-plan.ts); its context hands it to the resolvers. */
  plan: OperationPlan | undefined;
  #context: GatewayContext | undefined;
  /** It is counted in flight (traffic/in-flight.ts): given back once. */
  held = false;
  /** The caller whose in-flight slot it holds, given back once (traffic/caller-limits.ts). */
  slot: string | undefined;
  /** Its TTL in the response cache, as the cache computed it. */
  cacheTtl: number | undefined;
  /** Its key in the response cache: set for a query the cache looked up (never a mutation). */
  cacheKey: string | undefined;
  /** Its answer came from the response cache: with its JSON as kept, when the store has it (what a client is sent). */
  cached: { readonly json?: string | undefined } | undefined;
  /** What a mutation's fields evict from the response cache beyond what they return, if they may have changed it. */
  evictions: readonly FieldEvictions[] | undefined;
  /** An APQ registration waiting for validation, then its write under way. */
  registration: Registration | undefined;
  registering: Promise<void> | undefined;
  /** A subscription's event: the change it runs on (its document its subscription's, prepared already). */
  readonly event: SubscriptionEvent | undefined;

  constructor(
    /** Its parameters, an object always; the document stage may name its query (APQ, trusted documents). */
    public params: OperationParams,
    /** Its request: a batch's operations share one. */
    readonly request: RequestState,
    /** The JSON type of the parameters the client sent: `object`, or what checkParams refuses (params empty). */
    readonly paramsType: string = 'object',
    /** A subscription's event, and the document its subscription prepared. */
    event?: SubscriptionEvent & PreparedOperation,
  ) {
    this.event = event;
    this.prepared = event?.prepared;
    this.document = event?.document;
    this.definition = event?.definition;
    request.operations.push(this);
  }

  /** Its context, made as it is planned: the resolvers', the loaders' and the plan's; `operationOf` finds it by it. */
  get context(): GatewayContext | undefined {
    return this.#context;
  }

  set context(context: GatewayContext | undefined) {
    this.#context = context;
    if (context !== undefined) (context as { [operationKey]?: OperationState })[operationKey] = this;
  }

  /** A query marked `@live` (schema.graphql): a stream, sent again as the heads it read change (live-queries.ts). */
  get live(): boolean {
    const { definition } = this;
    return (
      definition?.operation === 'query' && definition.directives?.some(({ name }) => name.value === 'live') === true
    );
  }

  /** Its result is a stream that stays open (a subscription, a live query): it holds no unit in flight nor slot. */
  get streams(): boolean {
    return this.definition?.operation === 'subscription' || this.live;
  }

  /** Its type, once its document named it. */
  get type(): OperationType {
    return this.definition?.operation ?? 'unknown';
  }
}

/** Names `OperationState` as what a request's operations are (`RequestOperations`: that file may not import this). */
declare module './request-state.js' {
  interface RequestOperations {
    readonly operation: OperationState;
  }
}
