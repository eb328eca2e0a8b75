import type { GraphiQLOptions } from 'graphql-yoga';

/**
 * GraphiQL's error formatter (@graphiql/toolkit's `formatError`, minified in the page) adds the
 * `stack` of an error thrown in the browser, and yoga's page parses each document there before
 * sending it: a syntax error was shown with a minified stack of the page's own code. The gateway's
 * answers carry none (src/schema/errors.ts); the page keeps the message, locations and extensions.
 */
const formattedWithStack = /\{message:([\w$]+)\.message,stack:\1\.stack\}/g;

/** The page without the formatter's stack; a render-graphiql that formats otherwise fails here, not in a browser. */
export function withoutErrorStacks(html: string): string {
  const found = html.match(formattedWithStack)?.length ?? 0;
  if (found !== 1)
    throw new Error(
      `GraphiQL page: expected one error formatter adding a stack, found ${found} (has @graphql-yoga/render-graphiql changed?)`,
    );
  return html.replace(formattedWithStack, '{message:$1.message}');
}

/**
 * yoga's GraphiQL page with every asset inlined (no CDN; `@graphql-yoga/render-graphiql`), without
 * error stacks. The module (some 9 MB of script) loads on the first browser visit, not at start.
 */
export async function renderGraphiQLPage(options: GraphiQLOptions): Promise<string> {
  const { renderGraphiQL } = await import('@graphql-yoga/render-graphiql');
  return withoutErrorStacks(renderGraphiQL(options));
}

/** The query GraphiQL opens with (its comment says what it costs). */
export const defaultGraphiQLQuery = `# The first three heads with their hair, and how many heads there are:
# one upstream call (Get Heads).
# Fields marked "Needs a bearer token" (permissions, deleteHead) want an
# Authorization header: run the login mutation, then add
#   {"Authorization": "Bearer <accessToken>"}
# in the Headers pane below.
query HeadsWithHair {
  heads(first: 3) {
    totalCount
    nodes {
      id
      name
      url
      createdAt
      hair {
        name
        url
        style
        gender
      }
    }
  }
}
`;
