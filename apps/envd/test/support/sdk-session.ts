import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll } from 'vitest';
import { type RunningEnvd, startEnvd, type StartEnvdOptions } from './start-envd.ts';

export interface SdkSession {
  envd: RunningEnvd;
  /** The published SDK in debug mode, pointed at this envd. */
  sbx: Sandbox;
  /** A fresh temporary directory (real path) for the file's tests. */
  dir: string;
}

/**
 * For one test file: starts envd in-process, connects the e2b SDK to it in debug mode and makes a
 * temporary directory before the tests; tears all of it down after them. `assign` receives the session.
 */
export function useSdkSession(prefix: string, assign: (session: SdkSession) => void, options: StartEnvdOptions = {}): void {
  let session: SdkSession | undefined;
  beforeAll(async () => {
    const envd = await startEnvd(options);
    const sbx = await Sandbox.connect('debug_sandbox_id', { debug: true, sandboxUrl: envd.url, apiKey: 'x' });
    session = { envd, sbx, dir: realpathSync(mkdtempSync(join(tmpdir(), prefix))) };
    assign(session);
  });
  afterAll(async () => {
    await session?.envd.close();
    if (session) rmSync(session.dir, { recursive: true, force: true });
  });
}
