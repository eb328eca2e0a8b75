import { Need } from '../domain/needs.js';
import { connectionArgsSchema, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../domain/pages.js';
import { needs, plan } from '../plan/facts.js';
import { type PermissionDto, userRoles } from '../upstream/schemas.js';
import { builder } from './builder.js';
import { resolveWindowConnection } from './connections.js';
import { knownOrFail, UserRole } from './enums.js';
import { requireAuthorization } from './inputs.js';

export const PermissionRef = builder.objectRef<PermissionDto>('Permission').implement({
  description: 'A permission: a user role paired with an identifier.',
  fields: (t) => ({
    id: t.field({ type: 'UUID', description: 'The permission UUID.', resolve: (p) => p.id }),
    role: t.field({
      type: UserRole,
      description: 'The role it grants.',
      resolve: (p, _, ctx) => knownOrFail(userRoles, p.role, 'Permission.role', ctx.logger),
    }),
  }),
});

builder.queryFields((t) => ({
  permissions: t.connection(
    {
      type: PermissionRef,
      description: `Permissions, paged forwards or backwards; 1 to ${MAX_PAGE_SIZE} per page, ${DEFAULT_PAGE_SIZE} by default. Needs a bearer token.`,
      validate: connectionArgsSchema,
      ...plan({ kind: 'permissionListing' }),
      resolve: (_, args, ctx) => {
        requireAuthorization(ctx);
        const window = (offset: number, size: number) => ctx.loaders.listPermissionsWindow(offset, size);
        return resolveWindowConnection(args, {
          window,
          first: (size) => window(0, size),
          total: async () => (await window(0, 1)).total!,
        });
      },
    },
    {
      name: 'PermissionConnection',
      description: 'A page of permissions.',
      fields: (t) => ({
        totalCount: t.int({
          description: 'How many permissions the whole listing has.',
          ...needs(Need.total),
          resolve: (c) => c.totalCount(),
        }),
      }),
    },
    { name: 'PermissionEdge', description: 'A permission and its cursor.' },
  ),
}));
