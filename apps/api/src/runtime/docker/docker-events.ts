import type Docker from 'dockerode';
import type { EngineEvent, EngineEventStream } from '../engine-events.ts';
import { bounded } from './docker-call.ts';
import { PLATFORM_LABEL, SANDBOX_LABEL } from './docker-labels.ts';

/** How long the engine may take to answer the events request (the stream itself has no limit). */
const CONNECT_TIMEOUT_MS = 10_000;

interface RawEvent {
  Type?: string;
  Action?: string;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
  time?: number;
  timeNano?: number;
}

function translate(raw: RawEvent): EngineEvent | undefined {
  if (raw.Type !== 'container' || (raw.Action !== 'die' && raw.Action !== 'oom')) return undefined;
  const attributes = raw.Actor?.Attributes ?? {};
  const sandboxId = attributes[SANDBOX_LABEL];
  const containerId = raw.Actor?.ID;
  if (!sandboxId || !containerId) return undefined;
  const exitCode = attributes.exitCode === undefined ? undefined : Number(attributes.exitCode);
  return {
    kind: raw.Action === 'die' ? 'died' : 'oom',
    containerId,
    sandboxId,
    exitCode: Number.isFinite(exitCode) ? exitCode : undefined,
    time: raw.timeNano ? raw.timeNano / 1e9 : (raw.time ?? Date.now() / 1000),
  };
}

/**
 * Follows `die` and `oom` events of sandbox containers (of one platform when `platformId` is set)
 * from `since` (engine seconds): the Engine API `GET /events` stream, one JSON object per line.
 */
export async function followSandboxEvents(
  docker: Docker,
  platformId: string | undefined,
  since: number | undefined,
  onEvent: (event: EngineEvent) => void,
): Promise<EngineEventStream> {
  const label = platformId ? [`${PLATFORM_LABEL}=${platformId}`, SANDBOX_LABEL] : [SANDBOX_LABEL];
  const stream = (await bounded('follow engine events', CONNECT_TIMEOUT_MS, undefined, () =>
    docker.getEvents({ ...(since !== undefined ? { since } : {}), filters: { type: ['container'], event: ['die', 'oom'], label } }),
  )) as NodeJS.ReadableStream & { destroy(error?: Error): void };
  let buffered = '';
  stream.on('data', (chunk: Buffer | string) => {
    buffered += String(chunk);
    let newline = buffered.indexOf('\n');
    while (newline >= 0) {
      const line = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      newline = buffered.indexOf('\n');
      if (!line) continue;
      let raw: RawEvent;
      try {
        raw = JSON.parse(line) as RawEvent;
      } catch {
        continue;
      }
      const event = translate(raw);
      if (event) onEvent(event);
    }
  });
  const ended = new Promise<Error | undefined>((resolve) => {
    stream.once('error', (error: Error) => resolve(error));
    stream.once('end', () => resolve(undefined));
    stream.once('close', () => resolve(undefined));
  });
  return { ended, close: () => stream.destroy() };
}
