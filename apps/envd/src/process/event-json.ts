import type { ProcessEventInit } from './event-stream.ts';

/**
 * A `StartResponse` in proto3 JSON, byte for byte what `toJsonString(StartResponseSchema, create(…))` writes
 * (fields in field-number order, defaults left out, `error` whenever it is set, bytes in padded base64), built
 * without protobuf-es's reflection: every command's start and end event goes through here. Undefined for a shape
 * it does not know, which the caller encodes the generic way.
 */
export function startResponseJson(init: ProcessEventInit): string | undefined {
  const event = init.event;
  if (event === undefined || event.case === undefined) return '{"event":{}}';
  switch (event.case) {
    case 'start': {
      const pid = event.value.pid ?? 0;
      return pid === 0 ? '{"event":{"start":{}}}' : `{"event":{"start":{"pid":${pid}}}}`;
    }
    case 'end': {
      const { exitCode = 0, exited = false, status = '', error } = event.value;
      const end: Record<string, unknown> = {};
      if (exitCode !== 0) end.exitCode = exitCode;
      if (exited) end.exited = true;
      if (status !== '') end.status = status;
      if (error !== undefined) end.error = error;
      return JSON.stringify({ event: { end } });
    }
    case 'data': {
      const output = event.value.output;
      if (output === undefined || output.case === undefined) return '{"event":{"data":{}}}';
      const bytes = output.value;
      const base64 = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
      return `{"event":{"data":{"${output.case}":"${base64}"}}}`;
    }
    case 'keepalive':
      return '{"event":{"keepalive":{}}}';
    default:
      return undefined;
  }
}
