/**
 * `tidepool node`: reads and checks the settings once (a node holds no cluster secrets: it refuses to start when
 * handed the database or an API-only secret), then runs the agent.
 */
import { loadNodeAgentConfig } from './config.ts';
import { serveNodeAgent } from './node-agent/run-node-agent.ts';

export async function runNodeAgent(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  await serveNodeAgent(loadNodeAgentConfig(env));
}
