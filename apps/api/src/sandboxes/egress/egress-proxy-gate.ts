import { PlatformError } from '../../errors.ts';
import { UpstreamDialError } from '../../runtime/docker/egress-upstream.ts';
import type { UpstreamAddressPolicy } from '../../runtime/docker/upstream-address.ts';
import type { SecretCipher } from '../../secrets/secret-crypto.ts';
import type { EgressProxyRequest, StoredEgressProxy } from './egress-proxy-settings.ts';

/** Associated data of every sealed proxy password: a value sealed elsewhere does not open here (forks copy it). */
const PASSWORD_CONTEXT = 'sandbox-egress-proxy-password';

export interface EgressProxyGateDeps {
  /** The secrets key's cipher (created on first use). */
  cipher: () => SecretCipher;
  addresses: UpstreamAddressPolicy;
  /** Why this install cannot tunnel sandbox egress (undefined: it can). */
  problem: () => Promise<string | undefined>;
}

/**
 * Admits a sandbox's egress proxy before anything is made: the install can tunnel, the proxy's host resolves to
 * a permitted address (the reference platform refuses unresolvable and internal proxies up front), and the
 * password is sealed with the secrets key for the record. `open` gives it back to the dialer.
 */
export class EgressProxyGate {
  constructor(private readonly deps: EgressProxyGateDeps) {}

  async admit(request: EgressProxyRequest): Promise<StoredEgressProxy> {
    const problem = await this.deps.problem();
    if (problem) throw new PlatformError('invalid', `network.egressProxy is not supported on this install: ${problem}`);
    try {
      await this.deps.addresses.resolve(request.host, request.port);
    } catch (error) {
      if (error instanceof UpstreamDialError) throw new PlatformError('invalid', `network.egressProxy: ${error.message}`);
      throw error;
    }
    const { password, ...rest } = request;
    return { ...rest, ...(password !== undefined ? { sealedPassword: this.deps.cipher().seal(password, PASSWORD_CONTEXT).toString('base64') } : {}) };
  }

  open(sealed: string): string {
    return this.deps.cipher().open(Buffer.from(sealed, 'base64'), PASSWORD_CONTEXT);
  }
}
