# The gateway's image. No base image can be pulled where this repository is developed, so the
# runtime stage's steps are checked outside a container (test/fleet/runtime-install.test.ts), and
# test/deploy.test.ts holds this file to the config schema and package.json.

# Build: every dependency (TypeScript, @types) to compile src/ into dist/.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Run: runtime dependencies and dist/ only (dist/reference-upstream/main.js is the reference
# upstream, which compose.yaml runs from this same image).
FROM node:20-bookworm-slim
# tini as PID 1 forwards SIGTERM to node, whose handler drains (SHUTDOWN_DELAY_MS, then
# SHUTDOWN_GRACE_MS), and reaps zombies: as PID 1, node would ignore a signal that came before
# its handler was in place.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production HOST=0.0.0.0 PORT=4000 ADMIN_PORT=9090
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The files stay root's: the process (uid 1000) reads them and writes nothing.
USER node
# 4000: clients (/graphql). 9090: probes and /metrics only, never exposed to clients.
EXPOSE 4000 9090
ENTRYPOINT ["/usr/bin/tini", "--"]
# `npm start`'s flags (docs/operations.md#memory), without npm in between to swallow signals.
CMD ["node", "--max-semi-space-size=16", "--heap-growing-percent=30", "--no-allocation-site-pretenuring", "dist/main.js"]
