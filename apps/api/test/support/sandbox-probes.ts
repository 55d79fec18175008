import type { Sandbox } from 'e2b';

export interface Probe {
  open: boolean;
  ms: number;
  output: string;
  /** What bash said when the connection failed ("Connection refused", "No route to host", ...). */
  error?: string;
}

/**
 * What bash reports when the kernel answered a connection with a refusal (a TCP reset or an ICMP unreachable), as
 * the firewall's REJECT rules do. A connection dropped instead hangs until the probe's 5 s timeout and is reported
 * open (exit 124), so a probe that is not open and failed this way was refused rather than left to time out; how
 * long the refusal took is not the point (a loaded machine can delay it by a retransmitted SYN or two).
 */
export const REFUSED = /Connection refused|No route to host|Network is unreachable/;

/** Opens a TCP connection from inside the sandbox (bash's /dev/tcp, 5 s at most) and reads what comes back. */
export async function tcpProbe(sbx: Sandbox, address: string, port: number): Promise<Probe> {
  const script = [
    's=$(date +%s%N)',
    `out=$(timeout 5 bash -c 'exec 3<>/dev/tcp/${address}/${port}; timeout 2 cat <&3' 2>/tmp/.tcp-probe-$$); rc=$?`,
    'e=$(( ($(date +%s%N) - s) / 1000000 ))',
    'echo "$(head -c 300 /tmp/.tcp-probe-$$ | tr -s "\\n" " "; rm -f /tmp/.tcp-probe-$$)"',
    'echo "$rc $e $out"',
  ].join('; ');
  const result = await sbx.commands.run(script, { timeoutMs: 30_000 });
  const [error, ...lines] = result.stdout.split('\n');
  const [rc, ms, ...rest] = lines.join('\n').trim().split(' ');
  // 124: the 2 s read timed out on an open connection that sent nothing.
  return { open: rc === '0' || rc === '124', ms: Number(ms), output: rest.join(' '), ...(rc === '0' || rc === '124' ? {} : { error: error!.trim() }) };
}

/** An HTTP(S) request from inside the sandbox with curl; `resolve` pins the name to an address (no DNS). */
export async function curlFromSandbox(sbx: Sandbox, url: string, resolve?: string): Promise<{ ok: boolean; body: string }> {
  const pin = resolve ? `--resolve '${resolve}'` : '';
  const result = await sbx.commands.run(`curl -sk --max-time 5 ${pin} '${url}' || echo "curl-failed $?"`, { timeoutMs: 30_000 });
  const body = result.stdout.trim();
  return { ok: !body.startsWith('curl-failed') && body !== '', body };
}
