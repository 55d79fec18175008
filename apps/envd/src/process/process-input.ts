import { Code, ConnectError } from '@connectrpc/connect';
import type { ProcessInput } from '@tidepool/protocol/process';
import type { ProcessHandle } from './process-handle.ts';

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Writes one `ProcessInput` (stdin bytes for pipe processes, pty bytes for terminals). */
export async function writeProcessInput(handle: ProcessHandle, input: ProcessInput | undefined): Promise<void> {
  const value = input?.input;
  switch (value?.case) {
    case 'stdin':
      try {
        await handle.writeStdin(value.value);
      } catch (error) {
        throw new ConnectError(`error writing to stdin: ${message(error)}`, Code.Internal);
      }
      return;
    case 'pty':
      try {
        handle.writePty(value.value);
      } catch (error) {
        throw new ConnectError(`error writing to pty: ${message(error)}`, Code.Internal);
      }
      return;
    default:
      throw new ConnectError('input must carry stdin or pty bytes', Code.InvalidArgument);
  }
}
