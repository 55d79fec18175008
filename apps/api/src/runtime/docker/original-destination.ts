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

interface Waiting {
  peerAddress: string;
  peerPort: number;
  localPort: number;
  resolve(destination: TrackedDestination | undefined): void;
  reject(error: unknown): void;
}

/**
 * Looks connections up in the table, one read at a time: the kernel writes the whole table out on every read
 * (about 6.5 ms for 1,500 entries), so lookups asked while a read is running share the next one. However many
 * connections arrive at once, the table is read at most once in flight. Rejects when it is not readable.
 */
export class ConntrackReader {
  private waiting: Waiting[] = [];
  private reading = false;

  constructor(private readonly table = CONNTRACK_TABLE) {}

  lookup(peerAddress: string, peerPort: number, localPort: number): Promise<TrackedDestination | undefined> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ peerAddress, peerPort, localPort, resolve, reject });
      this.drain();
    });
  }

  private drain(): void {
    if (this.reading || this.waiting.length === 0) return;
    this.reading = true;
    // Everyone waiting now was accepted (their entries exist) before this read starts.
    const batch = this.waiting.splice(0);
    readFile(this.table, 'utf8')
      .then(
        (text) => {
          for (const w of batch) w.resolve(findOriginalDestination(text, w.peerAddress, w.peerPort, w.localPort));
        },
        (error: unknown) => {
          for (const w of batch) w.reject(error);
        },
      )
      .finally(() => {
        this.reading = false;
        this.drain();
      });
  }
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
