import type { GraphiQLOptions } from 'graphql-yoga';

/** `formatError` (@graphiql/toolkit) showed a syntax error the page found with a minified stack; answers carry none. */
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

/** yoga's GraphiQL page, every asset inlined (no CDN): its 9 MB module loads at the first visit, not at start. */
export async function renderGraphiQLPage(options: GraphiQLOptions): Promise<string> {
  const { renderGraphiQL } = await import('@graphql-yoga/render-graphiql');
  return withoutErrorStacks(renderGraphiQL(options));
}

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
