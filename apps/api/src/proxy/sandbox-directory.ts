import type { Duplex } from 'node:stream';

/** What the proxy needs to know about one sandbox to route traffic to it. */
export interface RoutableSandbox {
  sandboxId: string;
  state: 'running' | 'paused';
  /** Address of the container, reachable from the API process (container IP on the sandbox network). */
  address: string | undefined;
  /** Token envd checks in `X-Access-Token`; also the key of signed `/files` URLs. */
  envdAccessToken: string;
  /** Non-null when `network.allowPublicTraffic` is false: required on every non-envd port. */
  trafficAccessToken: string | null;
  /** Upstream Host for non-envd ports, `${PORT}` replaced by the port. */
  maskRequestHost: string | undefined;
  /** Ports whose service speaks TLS: reached over HTTPS without verifying the certificate. */
  httpsPorts: readonly number[];
  /** `autoResume.enabled`: traffic may resume the sandbox when it is paused. */
  autoResume: boolean;
  /** Opens streams to the container through its node (a node of another machine); none: a direct connect. */
  dial?: (address: string, port: number) => Promise<Duplex>;
}

/** The lifecycle side of the platform, as seen by the proxy. Implemented by the sandbox lifecycle. */
export interface SandboxDirectory {
  /** Current routing facts for one sandbox, or undefined when it does not exist (or cannot be reached). */
  find(sandboxId: string): RoutableSandbox | undefined;
  /** `find` for an id it does not know: may read through to shared state (another API replica's new sandbox). */
  lookup?(sandboxId: string): Promise<RoutableSandbox | undefined>;
  /** Why a sandbox `find` does not answer for exists but cannot be reached (its node was lost), or undefined. */
  unavailableReason?(sandboxId: string): string | undefined;
  /** Every running sandbox: used to find the owner of a signed `/files` URL that carries no routing headers. */
  running(): Iterable<RoutableSandbox>;
  /** A proxied HTTP exchange with the sandbox ended (a new sandbox's first one lets the warm pool refill). */
  served?(sandboxId: string): void;
  /** Resumes a paused sandbox on behalf of proxy traffic (only called when `autoResume` is true). */
  resumeForTraffic(sandboxId: string): Promise<RoutableSandbox>;
}
