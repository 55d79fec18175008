import type { ConnectRouter } from '@connectrpc/connect';
import type { EnvdContext } from '../context.ts';

// Placeholder: implemented by the process-service work.
export function registerProcessService(_router: ConnectRouter, _ctx: EnvdContext): void {}
