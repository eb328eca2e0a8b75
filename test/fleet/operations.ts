import type { Operation } from './load.js';

/*
 * What the load sends: reads of a few heads' names (one upstream call each, or a cached answer
 * with the response cache on) and, with a token, a rename now and then: a mutation, which must
 * reach the upstream exactly once however the fleet changes under it.
 */

export const headName = 'query Name($id: ID!) { head(id: $id) { name } }';
export const updateHead = 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { name } } }';
export const login = 'mutation($i: LoginInput!) { login(input: $i) { accessToken } }';

/** A fresh token of the reference upstream's demo user, logged in through `url`. */
export async function demoToken(url: string): Promise<string> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
    body: JSON.stringify({ query: login, variables: { i: { username: 'demo', password: 'demo-password' } } }),
  });
  const body = (await response.json()) as { data?: { login: { accessToken: string } } };
  if (body.data === undefined) throw new Error(`login through ${url} failed: ${JSON.stringify(body)}`);
  return body.data.login.accessToken;
}

/** Reads of `ids` in turn; with `writeEvery`, every that-many-th operation renames one of them instead. */
export function readsAndWrites(ids: readonly string[], token: string, writeEvery?: number): (n: number) => Operation {
  const authorization = { authorization: `Bearer ${token}` };
  return (n) => {
    const id = ids[n % ids.length]!;
    if (writeEvery !== undefined && n % writeEvery === writeEvery - 1)
      return {
        kind: 'write',
        body: { query: updateHead, variables: { i: { id, name: `fleet ${n}` } } },
        headers: authorization,
      };
    return { kind: 'read', body: { query: headName, variables: { id } }, headers: authorization };
  };
}
