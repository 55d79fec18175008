import type { ConnectRouter } from '@connectrpc/connect';
import type { EnvdContext } from '../context.ts';

// Placeholder: implemented by the filesystem-service work.
export function registerFilesystemService(_router: ConnectRouter, _ctx: EnvdContext): void {}
