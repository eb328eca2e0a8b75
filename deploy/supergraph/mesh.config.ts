// Hive's Mesh Compose: the supergraph of this gateway's subgraph and yours, for Hive Gateway
// (docs/clients.md#joining-a-supergraph).
//   npx mesh-compose --config deploy/supergraph/mesh.config.ts (the supergraph SDL on stdout)
// `endpoint` is where the router reaches the gateway: its SUBGRAPH_PATH on the public port; `source` the SDL it
// composes (without it, Mesh Compose asks the endpoint's `{ _service { sdl } }`, which answers the same).
import { defineConfig, loadGraphQLHTTPSubgraph } from '@graphql-mesh/compose-cli';

export const composeConfig = defineConfig({
  subgraphs: [
    {
      sourceHandler: loadGraphQLHTTPSubgraph('heads', {
        endpoint: 'http://gateway:4000/subgraph',
        source: '../../schema.subgraph.graphql',
        federation: true,
      }),
    },
    // Yours beside it:
    // {
    //   sourceHandler: loadGraphQLHTTPSubgraph('ratings', {
    //     endpoint: 'http://ratings:4001/graphql',
    //     federation: true,
    //   }),
    // },
  ],
});
