import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { promises as fs } from 'node:fs';
import { dirname } from 'node:path';
import { Filesystem } from '@tidepool/protocol/filesystem';
import type { EnvdContext } from '../context.ts';
import { resolveRpcUser } from '../identity/request-user.ts';
import { resolvePath } from '../identity/resolve-path.ts';
import type { SystemUser } from '../identity/system-users.ts';
import { keepaliveIntervalMs } from '../connect/keepalive.ts';
import { buildEntryInfo } from './entry-info.ts';
import { toConnectError } from './filesystem-errors.ts';
import { listDirectory } from './list-directory.ts';
import { networkFilesystemOf } from './network-mounts.ts';
import { makeDirsOwnedBy } from './ownership.ts';
import { PollingWatchers } from './polling-watchers.ts';
import type { WatchBarrier } from './watch-barrier.ts';
import { watchStream, type WatchOptions } from './watch-stream.ts';

interface WatchRequestFields {
  path: string;
  recursive: boolean;
  includeEntry: boolean;
  allowNetworkMounts: boolean;
}

/** Implements `filesystem.Filesystem`: stat, list, create, move, remove and watch paths. */
export function registerFilesystemService(router: ConnectRouter, envd: EnvdContext, watches: WatchBarrier): void {
  const pollingWatchers = new PollingWatchers(watches);

  const userOf = (ctx: HandlerContext): SystemUser => resolveRpcUser(envd.users, envd.state, ctx.requestHeader.get('authorization'));

  /** Resolves the request path for the request user and runs `fn`, mapping fs errors to Connect codes. */
  async function withPath<T>(path: string, ctx: HandlerContext, fn: (absolute: string, user: SystemUser) => Promise<T>): Promise<T> {
    const user = userOf(ctx);
    let absolute = path;
    try {
      absolute = resolvePath(path, user, envd.state.defaultWorkdir);
      return await fn(absolute, user);
    } catch (error) {
      throw toConnectError(error, absolute);
    }
  }

  async function watchOptions(request: WatchRequestFields, ctx: HandlerContext): Promise<WatchOptions> {
    return withPath(request.path, ctx, async (root) => {
      const stats = await fs.stat(root);
      if (!stats.isDirectory()) throw new ConnectError(`path is not a directory: ${root}`, Code.InvalidArgument);
      if (!request.allowNetworkMounts && (await networkFilesystemOf(root))) {
        throw new ConnectError(`cannot watch path on network filesystem: ${root}`, Code.InvalidArgument);
      }
      return { root, recursive: request.recursive, includeEntry: request.includeEntry, users: envd.users, barrier: watches };
    });
  }

  router.service(Filesystem, {
    async stat(request, ctx) {
      return withPath(request.path, ctx, async (absolute) => ({ entry: await buildEntryInfo(absolute, envd.users) }));
    },

    async makeDir(request, ctx) {
      return withPath(request.path, ctx, async (absolute, user) => {
        const existing = await fs.stat(absolute).catch(() => undefined);
        if (existing?.isDirectory()) throw new ConnectError(`directory already exists: ${absolute}`, Code.AlreadyExists);
        if (existing) throw new ConnectError(`path already exists and is not a directory: ${absolute}`, Code.InvalidArgument);
        await makeDirsOwnedBy(absolute, user);
        await watches.settle();
        return { entry: await buildEntryInfo(absolute, envd.users) };
      });
    },

    async move(request, ctx) {
      return withPath(request.source, ctx, async (source, user) => {
        const destination = resolvePath(request.destination, user, envd.state.defaultWorkdir);
        await fs.lstat(source);
        await makeDirsOwnedBy(dirname(destination), user);
        try {
          await fs.rename(source, destination);
        } catch (error) {
          throw new ConnectError(`error renaming '${source}' to '${destination}': ${(error as Error).message}`, Code.Internal);
        }
        await watches.settle();
        return { entry: await buildEntryInfo(destination, envd.users) };
      });
    },

    async listDir(request, ctx) {
      const depth = Math.max(1, request.depth || 1);
      return withPath(request.path, ctx, async (absolute) => ({ entries: await listDirectory(absolute, depth, envd.users) }));
    },

    async remove(request, ctx) {
      return withPath(request.path, ctx, async (absolute) => {
        await fs.rm(absolute, { recursive: true, force: true });
        await watches.settle();
        return {};
      });
    },

    async *watchDir(request, ctx) {
      const options = await watchOptions(request, ctx);
      const log = envd.logger.child({ rpc: 'WatchDir', path: options.root, recursive: options.recursive });
      log.debug('watch started');
      try {
        yield* watchStream(options, ctx.signal, keepaliveIntervalMs(ctx.requestHeader));
      } catch (error) {
        log.warn({ err: error }, 'watch failed');
        if (error instanceof ConnectError) throw error;
        throw new ConnectError(`error watching '${options.root}': ${(error as Error).message}`, Code.Internal);
      } finally {
        log.debug('watch ended');
      }
    },

    async createWatcher(request, ctx) {
      const options = await watchOptions(request, ctx);
      const watcherId = await pollingWatchers.create(options);
      envd.logger.debug({ rpc: 'CreateWatcher', path: options.root, watcherId }, 'polling watcher created');
      return { watcherId };
    },

    async getWatcherEvents(request) {
      return { events: await pollingWatchers.drain(request.watcherId) };
    },

    removeWatcher(request) {
      pollingWatchers.remove(request.watcherId);
      return {};
    },
  });

}
