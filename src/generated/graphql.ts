/* eslint-disable */
/** Internal type. DO NOT USE DIRECTLY. */
type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
/** Internal type. DO NOT USE DIRECTLY. */
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';
/** The art style of an asset (contract AssetStyles). */
export type AssetStyle =
  /** Upstream value `crt`. */
  | 'CRT'
  /** Upstream value `phr`. */
  | 'PHR'
  /** Upstream value `sca`. */
  | 'SCA'
  /** Upstream value `vox`. */
  | 'VOX';

/** Which head to delete. */
export type DeleteHeadInput = {
  /** Global ID or UUID of the head. */
  id: string | number;
};

/** The gender an asset is made for. */
export type Gender =
  /** Upstream value `female`. */
  | 'FEMALE'
  /** Upstream value `male`. */
  | 'MALE';

/** Credentials for the OAuth2 password flow. */
export type LoginInput = {
  /** Password. */
  password: string;
  /** User name. */
  username: string;
};

/** How often a subscription is billed; upstream sends the number of months (1, 2, 3, 6, 12). */
export type PaymentCycle =
  /** Upstream value `12`. */
  | 'ANNUAL'
  /** Upstream value `2`. */
  | 'BIMONTHLY'
  /** Upstream value `1`. */
  | 'MONTHLY'
  /** Upstream value `3`. */
  | 'QUARTERLY'
  /** Upstream value `6`. */
  | 'SEMIANNUAL';

/** Whether an organization subscription is public or private. */
export type PlatformType =
  /** Upstream value `private`. */
  | 'PRIVATE'
  /** Upstream value `public`. */
  | 'PUBLIC';

/** Changes to a head; give the id and at least one field. Only the fields given are sent. */
export type UpdateHeadInput = {
  /** New hair color. */
  hairColor?: string | null | undefined;
  /** Attach this hair. */
  hairId?: string | null | undefined;
  /** New head metadata. */
  headMetadata?: unknown;
  /** Global ID or UUID of the head. */
  id: string | number;
  /** New display name (at most 100 characters). */
  name?: string | null | undefined;
  /** New format label. */
  outputFormat?: unknown;
  /** New style label. */
  style?: unknown;
  /** New version label. */
  version?: unknown;
};

/** Changes to an organization subscription; give at least one field. Only the fields given are sent. */
export type UpdateSubscriptionInput = {
  /** Activate or deactivate. */
  active?: boolean | null | undefined;
  /** New expiry, in the format the upstream expects. */
  expireAt?: string | null | undefined;
  /** Which organization; the upstream picks the caller’s own when omitted. */
  organizationId?: string | null | undefined;
  /** New platform type. */
  platformType?: PlatformType | null | undefined;
  /** Switch to this plan. */
  subscriptionTypeId?: string | null | undefined;
};

/** A role a permission grants (contract UserRoles). */
export type UserRole =
  /** Upstream value `admin`. */
  | 'ADMIN'
  /** Upstream value `creator`. */
  | 'CREATOR'
  /** Upstream value `default`. */
  | 'DEFAULT'
  /** Upstream value `mod`. */
  | 'MOD';

export type DeleteHeadMutationVariables = Exact<{
  input: DeleteHeadInput;
}>;


export type DeleteHeadMutation = { deleteHead: { deletedHeadId: string, deletedHeadUuid: string } };

export type HeadWithHairQueryVariables = Exact<{
  id: string | number;
}>;


export type HeadWithHairQuery = { head: { id: string, uuid: string, name: string, url: string, createdAt: string, updatedAt: string | null, hair: { id: string, name: string, url: string, style: AssetStyle | null, gender: Gender | null } | null } | null };

export type HeadsPageQueryVariables = Exact<{
  first?: number | null | undefined;
  after?: string | null | undefined;
  search?: string | null | undefined;
}>;


export type HeadsPageQuery = { heads: { totalCount: number, pageInfo: { hasNextPage: boolean, endCursor: string | null }, edges: Array<{ cursor: string, node: { id: string, name: string, hair: { name: string } | null } }> } };

export type HeadsWithMetadataQueryVariables = Exact<{
  first?: number | null | undefined;
}>;


export type HeadsWithMetadataQuery = { heads: { nodes: Array<{ id: string, name: string, headMetadata: unknown }> } };

export type LiveHeadsQueryVariables = Exact<{
  first: number;
}>;


export type LiveHeadsQuery = { heads: { nodes: Array<{ id: string, name: string }> } };

export type LoginMutationVariables = Exact<{
  input: LoginInput;
}>;


export type LoginMutation = { login: { accessToken: string, tokenType: string } };

export type PermissionsQueryVariables = Exact<{
  first?: number | null | undefined;
}>;


export type PermissionsQuery = { permissions: { totalCount: number, nodes: Array<{ id: string, role: UserRole }> } };

export type UpdateHeadMutationVariables = Exact<{
  input: UpdateHeadInput;
}>;


export type UpdateHeadMutation = { updateHead: { head: { id: string, name: string, updatedAt: string | null } } };

export type UpdateSubscriptionMutationVariables = Exact<{
  input: UpdateSubscriptionInput;
}>;


export type UpdateSubscriptionMutation = { updateSubscription: { subscription: { id: string, active: boolean, platformType: PlatformType, subscriptionType: { name: string, paymentCycle: PaymentCycle } } } };

export type WatchHeadSubscriptionVariables = Exact<{
  id: string | number;
}>;


export type WatchHeadSubscription = { headChanged: { id: string, head: { id: string, name: string, url: string, hair: { name: string } | null } | null } };


export const DeleteHeadDocument = {"__meta__":{"hash":"sha256:9815ee697242298c2d0c7c8a0635603ad2c7c1fd28fb585737d02c93aa5d0a4b"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"DeleteHead"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"DeleteHeadInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"deleteHead"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"deletedHeadId"}},{"kind":"Field","name":{"kind":"Name","value":"deletedHeadUuid"}}]}}]}}]} as unknown as DocumentNode<DeleteHeadMutation, DeleteHeadMutationVariables>;
export const HeadWithHairDocument = {"__meta__":{"hash":"sha256:c0e108b41249a0767fbb4e8be40ce222dbdee8a586b455ca596979e753a07e74"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"HeadWithHair"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"head"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"uuid"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"url"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}},{"kind":"Field","name":{"kind":"Name","value":"updatedAt"}},{"kind":"Field","name":{"kind":"Name","value":"hair"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"url"}},{"kind":"Field","name":{"kind":"Name","value":"style"}},{"kind":"Field","name":{"kind":"Name","value":"gender"}}]}}]}}]}}]} as unknown as DocumentNode<HeadWithHairQuery, HeadWithHairQueryVariables>;
export const HeadsPageDocument = {"__meta__":{"hash":"sha256:c99ca84924463896e8c8e91df535e8e9457f95eb341740edc7b891824d003bce"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"HeadsPage"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"first"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"after"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"search"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"heads"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"Variable","name":{"kind":"Name","value":"first"}}},{"kind":"Argument","name":{"kind":"Name","value":"after"},"value":{"kind":"Variable","name":{"kind":"Name","value":"after"}}},{"kind":"Argument","name":{"kind":"Name","value":"search"},"value":{"kind":"Variable","name":{"kind":"Name","value":"search"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"totalCount"}},{"kind":"Field","name":{"kind":"Name","value":"pageInfo"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"hasNextPage"}},{"kind":"Field","name":{"kind":"Name","value":"endCursor"}}]}},{"kind":"Field","name":{"kind":"Name","value":"edges"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"cursor"}},{"kind":"Field","name":{"kind":"Name","value":"node"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"hair"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}}]}}]}}]}}]} as unknown as DocumentNode<HeadsPageQuery, HeadsPageQueryVariables>;
export const HeadsWithMetadataDocument = {"__meta__":{"hash":"sha256:e98e4defebf958d486499c23206e3be40718b48ac7576d7d16d3a7ffc3591062"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"HeadsWithMetadata"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"first"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"heads"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"Variable","name":{"kind":"Name","value":"first"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"nodes"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"headMetadata"}}]}}]}}]}}]} as unknown as DocumentNode<HeadsWithMetadataQuery, HeadsWithMetadataQueryVariables>;
export const LiveHeadsDocument = {"__meta__":{"hash":"sha256:6ff50391293e8898ff50a3a14d912cf9eae4cfccad8849a1f4e7b39794e537a4"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"LiveHeads"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"first"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}}}],"directives":[{"kind":"Directive","name":{"kind":"Name","value":"live"}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"heads"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"Variable","name":{"kind":"Name","value":"first"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"nodes"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}}]}}]} as unknown as DocumentNode<LiveHeadsQuery, LiveHeadsQueryVariables>;
export const LoginDocument = {"__meta__":{"hash":"sha256:217f8b1db6cfba5ff1c393afb77a5614c474bf10ad325e89d4258dbc99497d38"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"Login"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"LoginInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"login"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"accessToken"}},{"kind":"Field","name":{"kind":"Name","value":"tokenType"}}]}}]}}]} as unknown as DocumentNode<LoginMutation, LoginMutationVariables>;
export const PermissionsDocument = {"__meta__":{"hash":"sha256:69ce66b68342f58056773a760456cdeeffae9dc19ed1cea3ad3a4e9992a668f7"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"Permissions"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"first"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"permissions"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"first"},"value":{"kind":"Variable","name":{"kind":"Name","value":"first"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"totalCount"}},{"kind":"Field","name":{"kind":"Name","value":"nodes"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"role"}}]}}]}}]}}]} as unknown as DocumentNode<PermissionsQuery, PermissionsQueryVariables>;
export const UpdateHeadDocument = {"__meta__":{"hash":"sha256:1d7ba8db00d264b3e97b7dccb4e7eb947ebe638a48dfb6ef74cf279625974d53"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"UpdateHead"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"UpdateHeadInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"updateHead"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"head"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"updatedAt"}}]}}]}}]}}]} as unknown as DocumentNode<UpdateHeadMutation, UpdateHeadMutationVariables>;
export const UpdateSubscriptionDocument = {"__meta__":{"hash":"sha256:bff90ced17eb8e3c6d255e2d2d9a7d7d9e0991d00d063f2de223c1dd6b184ae6"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"UpdateSubscription"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"UpdateSubscriptionInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"updateSubscription"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"subscription"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"active"}},{"kind":"Field","name":{"kind":"Name","value":"platformType"}},{"kind":"Field","name":{"kind":"Name","value":"subscriptionType"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"paymentCycle"}}]}}]}}]}}]}}]} as unknown as DocumentNode<UpdateSubscriptionMutation, UpdateSubscriptionMutationVariables>;
export const WatchHeadDocument = {"__meta__":{"hash":"sha256:5e10905399203d4d071d5525ba0f945795cb247d2a367a24e9f830892ab0fda4"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"subscription","name":{"kind":"Name","value":"WatchHead"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"ID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"headChanged"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"head"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"url"}},{"kind":"Field","name":{"kind":"Name","value":"hair"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"name"}}]}}]}}]}}]}}]} as unknown as DocumentNode<WatchHeadSubscription, WatchHeadSubscriptionVariables>;