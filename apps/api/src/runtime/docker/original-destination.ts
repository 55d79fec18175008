import { readFile } from 'node:fs/promises';

/**
 * Where a connection REDIRECTed to a local port was originally going. Node cannot ask the socket
 * (SO_ORIGINAL_DST), so the kernel's connection tracking table is read instead: the entry whose original
 * direction comes from the peer (address, port) and whose reply direction comes from our listening port.
 * The table belongs to the network namespace of this process: the platform must run on the Docker host.
 */

export interface TrackedDestination {
  address: string;
  port: number;
}

export const CONNTRACK_TABLE = '/proc/net/nf_conntrack';

/** The original destination in the table's text for the connection peer → our `localPort`; undefined when absent. */
export function findOriginalDestination(table: string, peerAddress: string, peerPort: number, localPort: number): TrackedDestination | undefined {
  const needle = `src=${peerAddress} `;
  for (const line of table.split('\n')) {
    if (!line.includes(needle) || !/\btcp\b/.test(line)) continue;
    const fields: Record<'src' | 'dst' | 'sport' | 'dport', string[]> = { src: [], dst: [], sport: [], dport: [] };
    for (const match of line.matchAll(/\b(src|dst|sport|dport)=(\S+)/g)) fields[match[1] as keyof typeof fields].push(match[2]!);
    if (fields.src.length < 2 || fields.sport.length < 2) continue;
    const [origSrc, replySrc] = fields.src;
    const [origDst, replyDst] = fields.dst;
    const [origSport, replySport] = fields.sport;
    const [origDport, replyDport] = fields.dport;
    if (origSrc !== peerAddress || Number(origSport) !== peerPort) continue;
    // The reply direction leaves our listening port for the peer: the entry of this very connection.
    if (replyDst !== peerAddress || Number(replyDport) !== peerPort || Number(replySport) !== localPort || replySrc === undefined) continue;
    // REDIRECT rewrote the destination: the reply comes from the gateway, not from where the peer was going.
    if (origDst === undefined || origDport === undefined || replySrc === origDst) continue;
    return { address: origDst, port: Number(origDport) };
  }
  return undefined;
}

/** Reads the table; rejects when it is not readable (no conntrack procfs, not root, not on the host). */
export async function originalDestination(peerAddress: string, peerPort: number, localPort: number, table = CONNTRACK_TABLE): Promise<TrackedDestination | undefined> {
  return findOriginalDestination(await readFile(table, 'utf8'), peerAddress, peerPort, localPort);
}

/** Why original destinations cannot be known here, or undefined when they can. */
export async function conntrackProblem(table = CONNTRACK_TABLE): Promise<string | undefined> {
  try {
    await readFile(table, 'utf8');
    return undefined;
  } catch (error) {
    return `${table} is not readable (${(error as NodeJS.ErrnoException).code ?? String(error)}): the kernel's conntrack table is needed to know where a redirected connection was going`;
  }
}
