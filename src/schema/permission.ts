import { userRoles, type PermissionDto } from '../upstream/schemas.js';
import { builder } from './builder.js';
import { pagedSource, resolveWindowConnection } from './connections.js';
import { knownOrFail, UserRole } from './enums.js';
import { connectionArgsSchema, requireAuthorization } from './inputs.js';

export const PermissionRef = builder.objectRef<PermissionDto>('Permission').implement({
  description: 'A permission: a user role paired with an identifier.',
  fields: (t) => ({
    id: t.field({ type: 'UUID', description: 'The permission UUID.', resolve: (p) => p.id }),
    role: t.field({ type: UserRole, description: 'The role it grants.', resolve: (p, _, ctx) => knownOrFail(userRoles, p.role, 'Permission.role', ctx.logger) }),
  }),
});

builder.queryFields((t) => ({
  permissions: t.connection(
    {
      type: PermissionRef,
      description: 'Permissions, paged forwards or backwards; 1 to 100 per page, 50 by default. Needs a bearer token.',
      validate: connectionArgsSchema,
      resolve: (_, args, ctx) => {
        requireAuthorization(ctx);
        return resolveWindowConnection(
          args,
          pagedSource((offset, limit) => ctx.loaders.listPermissionsWindow(offset, limit), args.last),
        );
      },
    },
    {
      name: 'PermissionConnection',
      description: 'A page of permissions.',
      fields: (t) => ({ totalCount: t.int({ description: 'How many permissions the whole listing has.', resolve: (c) => c.totalCount() }) }),
    },
    { name: 'PermissionEdge', description: 'A permission and its cursor.' },
  ),
}));
