/**
 * `@e2b/code-interpreter` against the platform's HTTPS listener, in a process of its own (NODE_EXTRA_CA_CERTS
 * is read only at start; see sdk-tls-driver.ts). The connection comes from the environment (E2B_DOMAIN,
 * E2B_API_KEY; never E2B_SANDBOX_URL), so the SDK reaches the server at https://49999-<id>.<domain>.
 * Prints one JSON line: what it saw.
 *
 * Usage: node --import tsx code-interpreter-tls-driver.ts '{"allowPublicTraffic": false}'
 */
import { Sandbox } from '@e2b/code-interpreter';

const args = JSON.parse(process.argv[2] ?? '{}') as { allowPublicTraffic?: boolean };
const sbx = await Sandbox.create({ timeoutMs: 300_000, ...(args.allowPublicTraffic === false ? { network: { allowPublicTraffic: false } } : {}) });
try {
  const stdout: string[] = [];
  await sbx.runCode('n = 6 * 7');
  const python = await sbx.runCode('print("streamed"); n', { onStdout: (m) => void stdout.push(m.line) });
  const js = await sbx.runCode('const s = [1, 2, 3].map((v) => v * 2); s.join(",")', { language: 'js' });
  const host = sbx.getHost(49999);
  const unauthenticated = await fetch(`https://${host}/health`).then((r) => r.status);
  console.log(
    JSON.stringify({
      sandboxId: sbx.sandboxId,
      host,
      trafficToken: Boolean(sbx.trafficAccessToken),
      python: python.text,
      stdout,
      js: js.text,
      unauthenticated,
    }),
  );
} finally {
  await sbx.kill();
}
