import { describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { DockerCallError } from '../runtime/docker/docker-call.ts';
import { decodeError, encodeError, NodeChannelError } from './node-channel-errors.ts';

/** Through the wire as the agent sends it: encode, JSON, decode. */
function roundTrip(error: unknown): Error {
  return decodeError(JSON.parse(JSON.stringify(encodeError(error))), 'node1');
}

describe('node channel error mapping', () => {
  it('keeps a PlatformError’s kind, message and Retry-After', () => {
    const back = roundTrip(new PlatformError('limit', 'node full', { retryAfterSeconds: 3 }));
    expect(back).toBeInstanceOf(PlatformError);
    expect((back as PlatformError).kind).toBe('limit');
    expect(back.message).toBe('node full');
    expect((back as PlatformError).retryAfterSeconds).toBe(3);
    for (const kind of ['invalid', 'not_found', 'forbidden', 'conflict', 'busy', 'internal'] as const) {
      expect((roundTrip(new PlatformError(kind, kind)) as PlatformError).kind).toBe(kind);
    }
  });

  it('turns engine failures into DockerCallError with the engine status (dockerode errors too)', () => {
    const back = roundTrip(new DockerCallError('engine call pause (abc): no answer from the Docker engine within 30 s'));
    expect(back).toBeInstanceOf(DockerCallError);
    expect((back as DockerCallError).statusCode).toBeUndefined();
    const dockerode = Object.assign(new Error('(HTTP code 404) no such image - no such image: x:1'), { statusCode: 404 });
    const fromDockerode = roundTrip(dockerode);
    expect(fromDockerode).toBeInstanceOf(DockerCallError);
    expect((fromDockerode as DockerCallError).statusCode).toBe(404);
    expect(fromDockerode.message).toContain('no such image');
    expect(roundTrip('a thrown string')).toBeInstanceOf(DockerCallError);
  });

  it('keeps a refused call a bad_call NodeChannelError naming the node', () => {
    const back = roundTrip(new NodeChannelError('bad_call', 'unknown method "exec"'));
    expect(back).toBeInstanceOf(NodeChannelError);
    expect((back as NodeChannelError).code).toBe('bad_call');
    expect(back.message).toBe('node node1: unknown method "exec"');
  });

  it('clips huge messages and drops impossible statuses', () => {
    const wire = encodeError(Object.assign(new Error('x'.repeat(100_000)), { statusCode: 99_999 }));
    expect(wire.message.length).toBeLessThanOrEqual(4097);
    expect(wire.statusCode).toBeUndefined();
  });

  it('answers garbage from a node with a protocol error, never a crash or a forged kind', () => {
    for (const garbage of [null, 42, 'boom', [], {}, { code: 'platform', message: 'x', kind: 'root' }, { code: 'platform', message: 7, kind: 'limit' }, { code: 'exec', message: 'x' }]) {
      const back = decodeError(garbage, 'node1');
      expect(back).toBeInstanceOf(NodeChannelError);
      expect((back as NodeChannelError).code).toBe('protocol');
    }
    const wrongStatus = decodeError({ code: 'engine', message: 'x', statusCode: 'teapot' }, 'node1');
    expect((wrongStatus as DockerCallError).statusCode).toBeUndefined();
  });
});
