/**
 * Stand-in hosts for a node agent's egress proxy (network.rules on agents): the agent resolves destination names
 * itself, in its own process, so a test preloads a resolver into it (`NODE_OPTIONS` for `upCluster`'s `agentEnv`)
 * that answers the given names with addresses of stand-in servers in the node's namespace (startStandinServerIn).
 */
import { writeFileSync } from 'node:fs';
import type { Sandbox } from 'e2b';

/** Writes the preload to `file`; returns the agent environment that loads it. */
export function agentStandinResolver(file: string, names: Record<string, string>): Record<string, string> {
  writeFileSync(
    file,
    `const dns = require('node:dns');
const names = ${JSON.stringify(names)};
const original = dns.promises.lookup;
const lookup = function (host, options) {
  const address = names[String(host).toLowerCase()];
  if (!address) return original.apply(this, arguments);
  return Promise.resolve(options && options.all ? [{ address, family: 4 }] : { address, family: 4 });
};
dns.promises.lookup = lookup;
require('node:dns/promises').lookup = lookup;
require('node:module').syncBuiltinESMExports();
`,
  );
  return { NODE_OPTIONS: `--require ${file}` };
}

/** The headers a stand-in server at `address` saw of the sandbox's plain-HTTP request to `host` (its /headers answer). */
export async function headersSeen(sandbox: Sandbox, host: string, address: string): Promise<Record<string, string>> {
  const seen = await sandbox.commands.run(`curl -sS --max-time 10 --resolve ${host}:80:${address} http://${host}/headers`, { timeoutMs: 30_000 });
  return JSON.parse(seen.stdout) as Record<string, string>;
}
