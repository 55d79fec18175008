#!/usr/bin/env bash
# `pnpm envd:container`: runs envd alone inside a `base` container, in the foreground.
#
#   ENVD_PORT=49983 pnpm envd:container
#   E2B_DEBUG=true E2B_SANDBOX_URL=http://127.0.0.1:49983 node my-script.mjs   # published e2b SDK
#
# Builds whatever image is missing or stale first, publishes envd on 127.0.0.1:$ENVD_PORT, sends
# /init (default user `user`, workdir /home/user), then follows envd's log. Ctrl-C removes the
# container. ENVD_IMAGE runs another image; ENVD_LOG_LEVEL sets envd's log level (default info).
# envd runs in debug mode (-debug): there is no platform to give it an access token at birth,
# so it starts without one and the first /init may set it. Never use debug mode for real sandboxes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT="${ENVD_PORT:-49983}"
NAME="tidepool-envd-$PORT"

log() { printf '[envd-container] %s\n' "$*" >&2; }
die() { printf '[envd-container] ERROR: %s\n' "$*" >&2; exit 1; }

[[ "$PORT" =~ ^[0-9]+$ ]] && ((PORT > 0 && PORT < 65536)) || die "ENVD_PORT '$PORT' is not a TCP port"

if [[ -n "${ENVD_IMAGE:-}" ]]; then
  bash "$ROOT/scripts/ensure-docker.sh"
  IMAGE="$ENVD_IMAGE"
else
  IMAGE="$(bash "$ROOT/scripts/build-images.sh" | tail -n 1)"
fi

# A container left by an earlier run on this port (e.g. after kill -9) is ours to replace.
if docker container inspect "$NAME" >/dev/null 2>&1; then
  log "removing the previous $NAME"
  docker rm -f "$NAME" >/dev/null
fi

CID="$(docker run -d --name "$NAME" --label dev.tidepool.envd-container=1 \
  --env "ENVD_LOG_LEVEL=${ENVD_LOG_LEVEL:-info}" --entrypoint /opt/tidepool/bin/tini \
  --publish "127.0.0.1:$PORT:49983" "$IMAGE" -- /opt/tidepool/bin/envd -debug)" \
  || die "could not start $IMAGE on 127.0.0.1:$PORT (is the port taken? try ENVD_PORT=<other>)"

cleanup() {
  trap - EXIT INT TERM
  log "removing container ${CID:0:12}"
  docker rm -f "$CID" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

URL="http://127.0.0.1:$PORT"
# Wait for health, then /init, with Node (always present here) rather than assuming curl.
URL="$URL" node --input-type=module -e '
import { request } from "node:http";
// node:http, not fetch: a refused-then-reset connection through docker-proxy can leave fetch pending.
const call = (method, path, body) => new Promise((resolve, reject) => {
  const req = request(process.env.URL + path, { method, agent: false, headers: { "content-type": "application/json", connection: "close" } }, (res) => {
    let text = ""; res.setEncoding("utf8"); res.on("data", (c) => (text += c)); res.on("end", () => resolve({ status: res.statusCode, text }));
  });
  req.setTimeout(2000, () => req.destroy(new Error("timeout")));
  req.on("error", reject);
  req.end(body);
});
const deadline = Date.now() + 30_000;
let last = "";
for (;;) {
  try { const r = await call("GET", "/health"); if (r.status < 300) break; last = `HTTP ${r.status}`; }
  catch (e) { last = e.message; }
  if (Date.now() > deadline) { console.error(`[envd-container] ERROR: envd did not answer /health within 30 s (${last})`); process.exit(1); }
  await new Promise((r) => setTimeout(r, 100));
}
const r = await call("POST", "/init", JSON.stringify({ defaultUser: "user", defaultWorkdir: "/home/user" }));
if (r.status >= 300) console.error(`[envd-container] WARNING: POST /init answered ${r.status} ${r.text}; requests without a user run as the envd fallback user (root)`);
' || { docker logs "$CID" 2>&1 | tail -n 30 >&2; exit 1; }

cat >&2 <<INFO

  envd $(docker image inspect --format '{{ index .Config.Labels "dev.tidepool.envd-version" }}' "$IMAGE" 2>/dev/null) is running in container ${CID:0:12} ($IMAGE)
  URL:   $URL   (default user: user, workdir /home/user)

  Drive it with the published SDK:
    export E2B_DEBUG=true E2B_SANDBOX_URL=$URL
    node -e "const {Sandbox}=require('e2b'); Sandbox.create().then(s=>s.commands.run('whoami')).then(r=>console.log(r.stdout))"

  Ctrl-C stops and removes the container. envd log follows.

INFO
docker logs -f "$CID" || true
