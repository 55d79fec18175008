/**
 * The client side of the pool burst, in its own process (as real clients are: the SDK's own CPU work must
 * not queue behind the API's event loop, nor the API's behind it). Reads the platform's URL and key from the
 * environment, warms the SDK with one sandbox (created, used, killed), prints `ready`, then on a line `go` on stdin starts BURST_COUNT
 * creates → first command at once and prints one JSON line: latencies (ms), create latencies, failures, and the
 * CPU the SDK itself used for the burst (its calls share this one event loop, so the slowest cannot finish sooner).
 */
import { createInterface } from 'node:readline';
import { Sandbox } from 'e2b';

const count = Number(process.env.BURST_COUNT ?? 20);
const opts = { apiKey: process.env.BURST_API_KEY!, apiUrl: process.env.BURST_URL!, sandboxUrl: process.env.BURST_URL!, requestTimeoutMs: 60_000 };

async function burst(): Promise<void> {
  const latencies: number[] = [];
  const creates: number[] = [];
  const failures: string[] = [];
  const created: Sandbox[] = [];
  const begin = performance.now();
  const cpuBefore = process.cpuUsage();
  await Promise.all(
    Array.from({ length: count }, async () => {
      const start = performance.now();
      try {
        const sbx = await Sandbox.create('base', opts);
        creates.push(performance.now() - begin);
        created.push(sbx);
        const result = await sbx.commands.run('true');
        if (result.exitCode !== 0) throw new Error(`exit ${result.exitCode}`);
        latencies.push(performance.now() - start);
      } catch (error) {
        failures.push((error as Error).message);
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  const clientCpuMs = (cpu.user + cpu.system) / 1000;
  process.stdout.write(`${JSON.stringify({ latencies, creates, failures, sandboxIds: created.map((s) => s.sandboxId), clientCpuMs })}\n`);
}

// Loads and compiles the SDK's code paths before the measured burst, as a long-running client would have them.
{
  const warm = await Sandbox.create('base', opts);
  await warm.commands.run('true');
  await warm.kill();
}
process.stdout.write('ready\n');
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() !== 'go') continue;
  await burst();
  break;
}
lines.close();
