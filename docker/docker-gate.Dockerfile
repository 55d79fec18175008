# The docker gate (apps/docker-gate): the only container that holds the Docker socket. It forwards to the
# engine only the calls the Tidepool platform makes and refuses the rest (README "Security model").
# Used by docker-compose.yml.
#
# Built with NO registry, exactly like docker/api.Dockerfile: the locally produced tidepool/debian:bookworm
# plus the Node 20 binary (and its glibc) from the locally built envd runtime image, and the workspace's
# node_modules as they are after `pnpm install` (the gate needs only pino and tsx from them).
#
#   bash scripts/build-images.sh && docker build -f docker/docker-gate.Dockerfile -t tidepool/docker-gate:local .
ARG RUNTIME_IMAGE=tidepool/envd-runtime:latest
FROM ${RUNTIME_IMAGE} AS runtime

FROM tidepool/debian:bookworm
COPY --from=runtime /opt/tidepool/glibc /opt/tidepool/glibc
COPY --from=runtime /opt/tidepool/bin/node /usr/local/bin/node
WORKDIR /app
COPY package.json pnpm-workspace.yaml tsconfig.base.json ./
COPY node_modules ./node_modules
COPY apps/docker-gate ./apps/docker-gate
# Listens on every interface of its container (compose attaches it to an internal network shared with the
# API only and publishes nothing); the engine socket is mounted at its usual path.
ENV NODE_ENV=production \
    DOCKER_GATE_LISTEN=tcp://0.0.0.0:2375 \
    DOCKER_GATE_ENGINE=unix:///var/run/docker.sock
EXPOSE 2375
WORKDIR /app/apps/docker-gate
# Root in the container only to open the root-owned socket; compose drops every capability, makes the root
# filesystem read-only and sets no-new-privileges.
CMD ["node", "/app/node_modules/tsx/dist/cli.mjs", "src/main.ts"]
