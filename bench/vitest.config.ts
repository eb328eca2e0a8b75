import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import product from '../vitest.config.js';

/*
 * `npm run bench:check`: the checks of the bench's own code (its arithmetic and reports) and the
 * wall-clock checks that the product suite (`npm test`) holds to counts instead. Same resolution as
 * the product suite (its graphql alias); none of these run in `npm test`.
 */
export default defineConfig({
  ...product,
  root: fileURLToPath(new URL('..', import.meta.url)),
  test: { ...product.test, include: ['bench/checks/**/*.test.ts'], reporters: ['default'] },
});
