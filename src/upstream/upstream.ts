import {
  createUpstreamDispatcher,
  UpstreamTransport,
  type CallContext,
  type DispatcherOptions,
  type TransportOptions,
  type UpstreamCaller,
} from './transport.js';

/** The pool's options and the transport's, less the pool it makes itself. */
export type UpstreamOptions = DispatcherOptions & Omit<TransportOptions, 'dispatcher'>;

/** The process-wide side of the upstream layer: one pool, one transport; callers are per request. */
export interface Upstream {
  forRequest(context: CallContext): UpstreamCaller;
  /**
   * A caller on a connection of its own, for the readiness probe: it never waits in the
   * operations' pool (when slow operations hold every connection, a probe queued behind them
   * could not even time out until one came free).
   */
  forProbe(context: CallContext): UpstreamCaller;
  close(): Promise<void>;
}

export function createUpstream(options: UpstreamOptions): Upstream {
  const dispatcher = createUpstreamDispatcher(options);
  const transport = new UpstreamTransport({ ...options, dispatcher });
  // Connected on the first probe.
  const probeDispatcher = createUpstreamDispatcher({ ...options, connections: 1 });
  const probe = new UpstreamTransport({ ...options, dispatcher: probeDispatcher });
  return {
    forRequest: (context) => transport.forRequest(context),
    forProbe: (context) => probe.forRequest(context),
    close: async () => {
      await Promise.all([dispatcher.close(), probeDispatcher.close()]);
    },
  };
}
