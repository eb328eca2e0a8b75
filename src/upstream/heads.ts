import {
  type HeadADto,
  type HeadBDto,
  headAPageSchema,
  headASchema,
  headBListSchema,
  headBSchema,
  type PageDto,
  type UpdateHeadBody,
} from './schemas.js';
import type { UpstreamCaller } from './transport.js';

export interface ListHeadsArgs {
  readonly search?: string | undefined;
  readonly style?: string | undefined;
  readonly page: number;
  readonly size: number;
}

/** Get Heads (contract 4.4): a page of Head variant A, without head_metadata. */
export function listHeads(caller: UpstreamCaller, args: ListHeadsArgs): Promise<PageDto<HeadADto>> {
  return caller.call({
    operation: 'listHeads',
    query: { search: args.search, style: args.style, page: args.page, size: args.size },
    schema: headAPageSchema,
  });
}

/** Get Head Ext By Id, variant A (contract 4.5): Head A with head_metadata. */
export function getHeadExt(caller: UpstreamCaller, headId: string): Promise<HeadADto> {
  return caller.call({ operation: 'getHeadExt', params: { head_id: headId }, schema: headASchema });
}

/** Update Head (contract 4.3): the body carries only the fields the caller gave. Never retried. */
export function updateHead(caller: UpstreamCaller, headId: string, body: UpdateHeadBody): Promise<HeadADto> {
  return caller.call({ operation: 'updateHead', params: { head_id: headId }, json: body, schema: headASchema });
}

/** Delete Head (contract 4.1): 204, bearer token required. Never retried. */
export function deleteHead(caller: UpstreamCaller, headId: string): Promise<void> {
  return caller.call<void>({ operation: 'deleteHead', params: { head_id: headId } });
}

export interface ListHeadsExtArgs {
  readonly limit: number;
  readonly skip: number;
  readonly search?: string | undefined;
}

/** Get Heads Ext (contract 4.9): an array of Head variant B with head_metadata. */
export function listHeadsExt(caller: UpstreamCaller, args: ListHeadsExtArgs): Promise<HeadBDto[]> {
  return caller.call({
    operation: 'listHeadsExt',
    query: { limit: args.limit, skip: args.skip, search: args.search },
    schema: headBListSchema,
  });
}

/** Get Head By Id (contract 4.8): answers an array of Head B; an empty one means no such head. */
export async function getHeadById(caller: UpstreamCaller, id: string): Promise<HeadBDto> {
  const heads = await caller.call({
    operation: 'getHeadById',
    params: { id },
    schema: headBListSchema,
    notFoundWhen: (list) => list.length === 0,
  });
  return heads[0]!;
}

/** Get Head Ext By Id, variant B (contract 4.7): one Head B with head_metadata. */
export function getHeadExtById(caller: UpstreamCaller, id: string): Promise<HeadBDto> {
  return caller.call({ operation: 'getHeadExtById', params: { id }, schema: headBSchema });
}
