import { type PageDto, type PermissionDto, permissionPageSchema } from './schemas.js';
import type { UpstreamCaller } from './transport.js';

/** Get Permissions (contract 4.2): a page of Permission items; bearer token required. */
export function getPermissions(
  caller: UpstreamCaller,
  args: { readonly page: number; readonly size: number },
): Promise<PageDto<PermissionDto>> {
  return caller.call({
    operation: 'getPermissions',
    query: { page: args.page, size: args.size },
    schema: permissionPageSchema,
  });
}
