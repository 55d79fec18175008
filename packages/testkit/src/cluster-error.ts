/**
 * The one error type of the local-cluster layer (cluster-*.ts, local-cluster.ts, local-registry.ts): every
 * failure there is a ClusterError with a `kind` a caller (or the CLI) can act on, and a message that says what
 * to do about it.
 */
export type ClusterErrorKind =
  | 'invalid' // bad options or arguments (a name, a node count, an unknown node id)
  | 'not-root' // needs root (network namespaces, dockerd, iptables)
  | 'missing-tool' // a host tool is not installed
  | 'exists' // a cluster or node by that name is already up
  | 'not-found' // no such cluster (no state file)
  | 'engine' // a node's dockerd would not start, answer or stop
  | 'command'; // a host command (ip, iptables, openssl, docker) failed

export class ClusterError extends Error {
  constructor(
    readonly kind: ClusterErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'ClusterError';
  }
}
