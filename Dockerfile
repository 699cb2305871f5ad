# openplane's image: the `openplane` command with its production dependencies, run as TypeScript
# by Node's type stripping (Node >= 22.18), as `pnpm start` runs it; nothing is compiled.
#   docker build -t openplane .
#   docker run -p 127.0.0.1:2585:2585 -v openplane-data:/data openplane            (dataplane)
#   docker run -p 127.0.0.1:2584:2584 -v openplane-data:/data openplane \
#     node packages/cli/src/main.ts appview                                       (+ the AppView)
# infra/docker-compose.yml runs the whole stack from it.
ARG NODE_IMAGE=node:22-bookworm-slim

FROM ${NODE_IMAGE} AS build
# The roaring addon (the follow graph) compiles from source when no prebuilt binary fits the
# platform; better to have the tools here than an install that fails on one architecture.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
# The version package.json's packageManager pins (tests/contract/deploy-files.test.ts checks).
RUN npm install -g pnpm@10.34.9
WORKDIR /app
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./
COPY packages ./packages
# Only the command and the packages it imports, production dependencies only (no test network,
# no codegen tools); the lockfile as committed, or the build fails.
RUN pnpm install --frozen-lockfile --prod --filter @openplane/cli...

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
  DATAPLANE_HOST=0.0.0.0 \
  DATAPLANE_DATA_DIR=/data
WORKDIR /app
COPY --from=build /app /app
# The embedded Postgres and the AppView's signing key live in /data, writable by `node` alone.
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
# 2585: the dataplane (gRPC, /metrics, /_live, /_ready); 2584: the AppView (`appview`).
EXPOSE 2585 2584
# Liveness of the dataplane, on the ops port when one is set (the rpc port then serves rpcs
# alone); an `appview` container running the AppView alone overrides it.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:' + (process.env.DATAPLANE_OPS_PORT || process.env.DATAPLANE_PORT || 2585) + '/_live').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
# SIGTERM reaches node itself (exec form): it drains and stops within 30 s.
STOPSIGNAL SIGTERM
CMD ["node", "--max-semi-space-size=64", "packages/cli/src/main.ts", "start"]
