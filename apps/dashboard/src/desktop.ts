/**
 * The desktop view's pure parts: which sandboxes have a desktop, the stream's start script and what its exits
 * mean, the password, and the noVNC page's URL on the sandbox's own host.
 *
 * The stream is what `@e2b/desktop`'s `stream.start()` runs — x11vnc on the display, noVNC's proxy on 6080 — with
 * two differences that keep it private: x11vnc takes a password (the dashboard makes one per start and hands it to
 * noVNC in the URL's fragment, which never leaves the browser) and listens on a unix socket only — no TCP port,
 * not even on loopback, which envd would forward to the sandbox's address — so only noVNC on 6080 is reachable
 * through the platform's proxy, and it only relays to x11vnc, which asks for the password.
 */

/** Templates whose sandboxes have an X desktop (the built-in `desktop`). */
const DESKTOP_TEMPLATES = new Set(['desktop']);

export function isDesktopSandbox(target: { templateID: string; alias?: string }): boolean {
  return DESKTOP_TEMPLATES.has(target.templateID) || (target.alias !== undefined && DESKTOP_TEMPLATES.has(target.alias));
}

/** The display `@e2b/desktop` starts (Xvfb :0) and the ports its stream uses. */
export const DESKTOP_DISPLAY = ':0';
/** x11vnc listens on a unix socket here (mode 700), and nowhere else; noVNC's websockify relays to it. */
export const VNC_SOCKET_DIR = '/tmp/.tidepool-dashboard-vnc';
export const NOVNC_PORT = 6080;
/** envd's tag of the stream process: found again after a reload, signalled by Stop. */
export const STREAM_TAG = 'dashboard-desktop-stream';
/** Where the stream keeps its password (mode 600, the sandbox user's), so a reloaded page can show it again. */
export const PASSWORD_FILE = '/home/user/.vnc/tidepool-dashboard-password';
/** The line the start script prints once x11vnc and noVNC both listen. */
export const READY_LINE = 'tidepool-desktop: ready';

/** Exit codes of the start script. */
export const STREAM_EXIT = {
  noDisplay: 10,
  displayRestarting: 11,
  alreadyRunning: 12,
  vncFailed: 13,
  novncFailed: 14,
  vncEnded: 15,
  novncEnded: 16,
} as const;

const PASSWORD_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789';
/** VNC's password authentication uses the first 8 characters only. */
const PASSWORD_LENGTH = 8;

/** A fresh password for one stream: 8 characters from the browser's CSPRNG (VNC reads no more than 8). */
export function streamPassword(random: (bytes: Uint8Array) => Uint8Array = (b) => crypto.getRandomValues(b)): string {
  const bytes = random(new Uint8Array(PASSWORD_LENGTH * 2));
  let out = '';
  // Rejection sampling keeps every character equally likely.
  const limit = 256 - (256 % PASSWORD_ALPHABET.length);
  for (const byte of bytes) {
    if (byte >= limit) continue;
    out += PASSWORD_ALPHABET[byte % PASSWORD_ALPHABET.length];
    if (out.length === PASSWORD_LENGTH) return out;
  }
  return out.length === PASSWORD_LENGTH ? out : streamPassword(random);
}

/**
 * The stream, as one bash script run by envd as the sandbox user (its pid is the stream's): checks the display,
 * writes the password file, starts x11vnc (unix socket only, password) and noVNC's websockify (the proxy
 * novnc_proxy launches, run directly since it is told the socket), prints READY_LINE and waits. Both children die
 * with the script (`setpriv --pdeathsig`), so signalling it ends the stream. The password comes in TIDEPOOL_DESKTOP_PASSWORD, never on a command line.
 */
export const STREAM_SCRIPT = `set -u
display=${DESKTOP_DISPLAY}
n=\${display#:}
log=/tmp/tidepool-dashboard-desktop.log
pwfile=${PASSWORD_FILE}
sockdir=${VNC_SOCKET_DIR}
listening() { netstat -tln 2>/dev/null | grep -q "[:.]$1 "; }
if ! grep -q "/tmp/.X11-unix/X$n\\$" /proc/net/unix; then
  if [ -f "/tmp/.tidepool-display/$n.cmd" ]; then
    echo "the X display $display is not running (its Xvfb exited); it is being started again: retry in a few seconds" >&2
    exit ${STREAM_EXIT.displayRestarting}
  fi
  echo "no X display $display runs in this sandbox: it starts when @e2b/desktop's Sandbox.create() connects (or run Xvfb $display and startxfce4 in the terminal)" >&2
  exit ${STREAM_EXIT.noDisplay}
fi
if pgrep -x x11vnc >/dev/null || listening ${NOVNC_PORT}; then
  echo "a desktop stream already runs in this sandbox (an x11vnc, or port ${NOVNC_PORT} taken), e.g. @e2b/desktop's stream.start(): stop it there first" >&2
  exit ${STREAM_EXIT.alreadyRunning}
fi
umask 077
mkdir -p "\${pwfile%/*}" "$sockdir"
chmod 700 "$sockdir"
rm -f "$sockdir/socket"
printf '%s\\n' "$TIDEPOOL_DESKTOP_PASSWORD" >"$pwfile"
unset TIDEPOOL_DESKTOP_PASSWORD
cleanup() { rm -f "$pwfile"; kill "\${vnc:-}" "\${novnc:-}" 2>/dev/null; }
trap 'cleanup; exit 0' TERM INT HUP
: >"$log"
# No TCP port at all (-rfbport 0, -rfbportv6 -1): envd forwards loopback-only ports to the sandbox's address.
setpriv --pdeathsig TERM x11vnc -display "$display" -rfbport 0 -rfbportv6 -1 -unixsock "$sockdir/socket" -passwdfile "$pwfile" -forever -shared -wait 50 >>"$log" 2>&1 </dev/null &
vnc=$!
for _ in $(seq 1 150); do [ -S "$sockdir/socket" ] && break; kill -0 "$vnc" 2>/dev/null || break; sleep 0.1; done
if [ ! -S "$sockdir/socket" ]; then
  echo "x11vnc did not start on $display: $(tail -n 3 "$log" | tr '\\n' ' ')" >&2
  cleanup; exit ${STREAM_EXIT.vncFailed}
fi
setpriv --pdeathsig TERM websockify --web /opt/noVNC --unix-target="$sockdir/socket" ${NOVNC_PORT} >>"$log" 2>&1 </dev/null &
novnc=$!
for _ in $(seq 1 300); do listening ${NOVNC_PORT} && break; kill -0 "$novnc" 2>/dev/null || break; sleep 0.1; done
if ! listening ${NOVNC_PORT}; then
  echo "noVNC did not start on port ${NOVNC_PORT}: $(tail -n 3 "$log" | tr '\\n' ' ')" >&2
  cleanup; exit ${STREAM_EXIT.novncFailed}
fi
echo "${READY_LINE}"
wait -n "$vnc" "$novnc"
if ! kill -0 "$vnc" 2>/dev/null; then
  echo "x11vnc ended (the X display $display may have gone): $(tail -n 2 "$log" | tr '\\n' ' ')" >&2
  cleanup; exit ${STREAM_EXIT.vncEnded}
fi
echo "noVNC ended: $(tail -n 2 "$log" | tr '\\n' ' ')" >&2
cleanup; exit ${STREAM_EXIT.novncEnded}
`;

/** What the view says when the stream process ended: the script's own words when it gave any. */
export function describeStreamEnd(exitCode: number, stderr: string, status = ''): string {
  const said = stderr.trim().split('\n').filter(Boolean).pop();
  switch (exitCode) {
    case STREAM_EXIT.noDisplay:
    case STREAM_EXIT.displayRestarting:
    case STREAM_EXIT.alreadyRunning:
    case STREAM_EXIT.vncFailed:
    case STREAM_EXIT.novncFailed:
    case STREAM_EXIT.vncEnded:
    case STREAM_EXIT.novncEnded:
      return said ? capitalise(said) : `The desktop stream ended (exit code ${exitCode}).`;
    case 0:
      return 'The desktop stream was stopped.';
    default:
      return `The desktop stream ended (${status || `exit code ${exitCode}`})${said ? `: ${said}` : ''}.`;
  }
}

function capitalise(text: string): string {
  const sentence = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?]$/.test(sentence) ? sentence : `${sentence}.`;
}

/** Where this page is served from (`window.location`'s parts). */
export interface PageLocation {
  protocol: string;
  port: string;
}

/**
 * The noVNC page of a sandbox, on its own host `6080-<id>.<domain>` (never the dashboard's origin, so nothing the
 * sandbox serves runs with the dashboard's key). With the platform's public domain (`host[:port]`, HTTPS) that one;
 * otherwise the sandbox domain on this page's scheme and port. The password goes in the fragment: noVNC reads it
 * there, and a fragment is never sent to a server or in a Referer.
 */
export function streamUrl(options: { sandboxID: string; sandboxDomain: string; publicDomain?: string | null; page: PageLocation; password: string }): string {
  const { sandboxID, sandboxDomain, publicDomain, page, password } = options;
  const origin = publicDomain ? `https://${NOVNC_PORT}-${sandboxID}.${publicDomain}` : `${page.protocol}//${NOVNC_PORT}-${sandboxID}.${sandboxDomain}${page.port ? `:${page.port}` : ''}`;
  const query = new URLSearchParams({ autoconnect: 'true', resize: 'scale', reconnect: 'true', reconnect_delay: '1500', show_dot: 'true' });
  const fragment = new URLSearchParams({ password });
  return `${origin}/vnc.html?${query}#${fragment}`;
}
