import type { OperationName } from '../../domain/operations.js';
import type { Exchange } from '../exchange.js';
import type { ReferenceStore } from '../store.js';
import { updateHead } from './head-update.js';
import { deleteHead, getHeadById, getHeadExt, getHeadExtById, listHeads, listHeadsExt } from './heads.js';
import { login } from './login.js';
import { getPermissions } from './permissions.js';
import type { Handler } from './shared.js';
import { updateSubscription } from './subscriptions.js';

const handlers: Record<OperationName, Handler> = {
  listHeads,
  getHeadExt,
  updateHead,
  deleteHead,
  listHeadsExt,
  getHeadById,
  getHeadExtById,
  getPermissions,
  updateSubscription,
  login,
};

/** Runs the handler of a routed exchange. */
export function dispatch(ex: Exchange, store: ReferenceStore): void {
  try {
    handlers[ex.operation!](ex, store);
  } catch (error) {
    // A bug here must surface as a 500 for the client under test, not as a hung request.
    if (!ex.res.headersSent)
      ex.send(500, JSON.stringify({ detail: `reference upstream error: ${(error as Error).message}` }));
    else ex.finish(undefined);
  }
}
