/* eslint-disable */
import * as types from './graphql.js';
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';

/**
 * Map of all GraphQL operations in the project.
 *
 * This map has several performance disadvantages:
 * 1. It is not tree-shakeable, so it will include all operations in the project.
 * 2. It is not minifiable, so the string of a GraphQL query will be multiple times inside the bundle.
 * 3. It does not support dead code elimination, so it will add unused operations.
 *
 * Therefore it is highly recommended to use the babel or swc plugin for production.
 * Learn more about it here: https://the-guild.dev/graphql/codegen/plugins/presets/preset-client#reducing-bundle-size
 */
type Documents = {
    "mutation DeleteHead($input: DeleteHeadInput!) {\n  deleteHead(input: $input) {\n    deletedHeadId\n    deletedHeadUuid\n  }\n}": typeof types.DeleteHeadDocument,
    "query HeadWithHair($id: ID!) {\n  head(id: $id) {\n    id\n    uuid\n    name\n    url\n    createdAt\n    updatedAt\n    hair {\n      id\n      name\n      url\n      style\n      gender\n    }\n  }\n}": typeof types.HeadWithHairDocument,
    "query HeadsPage($first: Int, $after: String, $search: String) {\n  heads(first: $first, after: $after, search: $search) {\n    totalCount\n    pageInfo {\n      hasNextPage\n      endCursor\n    }\n    edges {\n      cursor\n      node {\n        id\n        name\n        hair {\n          name\n        }\n      }\n    }\n  }\n}": typeof types.HeadsPageDocument,
    "query HeadsWithMetadata($first: Int) {\n  heads(first: $first) {\n    nodes {\n      id\n      name\n      headMetadata\n    }\n  }\n}": typeof types.HeadsWithMetadataDocument,
    "query LiveHeads($first: Int!) @live {\n  heads(first: $first) {\n    nodes {\n      id\n      name\n    }\n  }\n}": typeof types.LiveHeadsDocument,
    "mutation Login($input: LoginInput!) {\n  login(input: $input) {\n    accessToken\n    tokenType\n  }\n}": typeof types.LoginDocument,
    "query Permissions($first: Int) {\n  permissions(first: $first) {\n    totalCount\n    nodes {\n      id\n      role\n    }\n  }\n}": typeof types.PermissionsDocument,
    "mutation UpdateHead($input: UpdateHeadInput!) {\n  updateHead(input: $input) {\n    head {\n      id\n      name\n      updatedAt\n    }\n  }\n}": typeof types.UpdateHeadDocument,
    "mutation UpdateSubscription($input: UpdateSubscriptionInput!) {\n  updateSubscription(input: $input) {\n    subscription {\n      id\n      active\n      platformType\n      subscriptionType {\n        name\n        paymentCycle\n      }\n    }\n  }\n}": typeof types.UpdateSubscriptionDocument,
    "subscription WatchHead($id: ID!) {\n  headChanged(id: $id) {\n    id\n    head {\n      id\n      name\n      url\n      hair {\n        name\n      }\n    }\n  }\n}": typeof types.WatchHeadDocument,
};
const documents: Documents = {
    "mutation DeleteHead($input: DeleteHeadInput!) {\n  deleteHead(input: $input) {\n    deletedHeadId\n    deletedHeadUuid\n  }\n}": types.DeleteHeadDocument,
    "query HeadWithHair($id: ID!) {\n  head(id: $id) {\n    id\n    uuid\n    name\n    url\n    createdAt\n    updatedAt\n    hair {\n      id\n      name\n      url\n      style\n      gender\n    }\n  }\n}": types.HeadWithHairDocument,
    "query HeadsPage($first: Int, $after: String, $search: String) {\n  heads(first: $first, after: $after, search: $search) {\n    totalCount\n    pageInfo {\n      hasNextPage\n      endCursor\n    }\n    edges {\n      cursor\n      node {\n        id\n        name\n        hair {\n          name\n        }\n      }\n    }\n  }\n}": types.HeadsPageDocument,
    "query HeadsWithMetadata($first: Int) {\n  heads(first: $first) {\n    nodes {\n      id\n      name\n      headMetadata\n    }\n  }\n}": types.HeadsWithMetadataDocument,
    "query LiveHeads($first: Int!) @live {\n  heads(first: $first) {\n    nodes {\n      id\n      name\n    }\n  }\n}": types.LiveHeadsDocument,
    "mutation Login($input: LoginInput!) {\n  login(input: $input) {\n    accessToken\n    tokenType\n  }\n}": types.LoginDocument,
    "query Permissions($first: Int) {\n  permissions(first: $first) {\n    totalCount\n    nodes {\n      id\n      role\n    }\n  }\n}": types.PermissionsDocument,
    "mutation UpdateHead($input: UpdateHeadInput!) {\n  updateHead(input: $input) {\n    head {\n      id\n      name\n      updatedAt\n    }\n  }\n}": types.UpdateHeadDocument,
    "mutation UpdateSubscription($input: UpdateSubscriptionInput!) {\n  updateSubscription(input: $input) {\n    subscription {\n      id\n      active\n      platformType\n      subscriptionType {\n        name\n        paymentCycle\n      }\n    }\n  }\n}": types.UpdateSubscriptionDocument,
    "subscription WatchHead($id: ID!) {\n  headChanged(id: $id) {\n    id\n    head {\n      id\n      name\n      url\n      hair {\n        name\n      }\n    }\n  }\n}": types.WatchHeadDocument,
};

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 *
 *
 * @example
 * ```ts
 * const query = graphql(`query GetUser($id: ID!) { user(id: $id) { name } }`);
 * ```
 *
 * The query argument is unknown!
 * Please regenerate the types.
 */
export function graphql(source: string): unknown;

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "mutation DeleteHead($input: DeleteHeadInput!) {\n  deleteHead(input: $input) {\n    deletedHeadId\n    deletedHeadUuid\n  }\n}"): (typeof documents)["mutation DeleteHead($input: DeleteHeadInput!) {\n  deleteHead(input: $input) {\n    deletedHeadId\n    deletedHeadUuid\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "query HeadWithHair($id: ID!) {\n  head(id: $id) {\n    id\n    uuid\n    name\n    url\n    createdAt\n    updatedAt\n    hair {\n      id\n      name\n      url\n      style\n      gender\n    }\n  }\n}"): (typeof documents)["query HeadWithHair($id: ID!) {\n  head(id: $id) {\n    id\n    uuid\n    name\n    url\n    createdAt\n    updatedAt\n    hair {\n      id\n      name\n      url\n      style\n      gender\n    }\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "query HeadsPage($first: Int, $after: String, $search: String) {\n  heads(first: $first, after: $after, search: $search) {\n    totalCount\n    pageInfo {\n      hasNextPage\n      endCursor\n    }\n    edges {\n      cursor\n      node {\n        id\n        name\n        hair {\n          name\n        }\n      }\n    }\n  }\n}"): (typeof documents)["query HeadsPage($first: Int, $after: String, $search: String) {\n  heads(first: $first, after: $after, search: $search) {\n    totalCount\n    pageInfo {\n      hasNextPage\n      endCursor\n    }\n    edges {\n      cursor\n      node {\n        id\n        name\n        hair {\n          name\n        }\n      }\n    }\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "query HeadsWithMetadata($first: Int) {\n  heads(first: $first) {\n    nodes {\n      id\n      name\n      headMetadata\n    }\n  }\n}"): (typeof documents)["query HeadsWithMetadata($first: Int) {\n  heads(first: $first) {\n    nodes {\n      id\n      name\n      headMetadata\n    }\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "query LiveHeads($first: Int!) @live {\n  heads(first: $first) {\n    nodes {\n      id\n      name\n    }\n  }\n}"): (typeof documents)["query LiveHeads($first: Int!) @live {\n  heads(first: $first) {\n    nodes {\n      id\n      name\n    }\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "mutation Login($input: LoginInput!) {\n  login(input: $input) {\n    accessToken\n    tokenType\n  }\n}"): (typeof documents)["mutation Login($input: LoginInput!) {\n  login(input: $input) {\n    accessToken\n    tokenType\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "query Permissions($first: Int) {\n  permissions(first: $first) {\n    totalCount\n    nodes {\n      id\n      role\n    }\n  }\n}"): (typeof documents)["query Permissions($first: Int) {\n  permissions(first: $first) {\n    totalCount\n    nodes {\n      id\n      role\n    }\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "mutation UpdateHead($input: UpdateHeadInput!) {\n  updateHead(input: $input) {\n    head {\n      id\n      name\n      updatedAt\n    }\n  }\n}"): (typeof documents)["mutation UpdateHead($input: UpdateHeadInput!) {\n  updateHead(input: $input) {\n    head {\n      id\n      name\n      updatedAt\n    }\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "mutation UpdateSubscription($input: UpdateSubscriptionInput!) {\n  updateSubscription(input: $input) {\n    subscription {\n      id\n      active\n      platformType\n      subscriptionType {\n        name\n        paymentCycle\n      }\n    }\n  }\n}"): (typeof documents)["mutation UpdateSubscription($input: UpdateSubscriptionInput!) {\n  updateSubscription(input: $input) {\n    subscription {\n      id\n      active\n      platformType\n      subscriptionType {\n        name\n        paymentCycle\n      }\n    }\n  }\n}"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "subscription WatchHead($id: ID!) {\n  headChanged(id: $id) {\n    id\n    head {\n      id\n      name\n      url\n      hair {\n        name\n      }\n    }\n  }\n}"): (typeof documents)["subscription WatchHead($id: ID!) {\n  headChanged(id: $id) {\n    id\n    head {\n      id\n      name\n      url\n      hair {\n        name\n      }\n    }\n  }\n}"];

export function graphql(source: string) {
  return (documents as any)[source] ?? {};
}

export type DocumentType<TDocumentNode extends DocumentNode<any, any>> = TDocumentNode extends DocumentNode<  infer TType,  any>  ? TType  : never;