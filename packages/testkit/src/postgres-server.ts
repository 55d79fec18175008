import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getFreePort } from './ports.ts';

/** A throwaway PostgreSQL cluster on a loopback port; `dispose` stops it and deletes its files. */
export interface PostgresServer {
  /** `postgres://tidepool@127.0.0.1:<port>/tidepool`: the database created with the cluster, as its owner `tidepool` (no superuser). */
  url: string;
  port: number;
  /** Creates another (empty) database on this cluster and returns its URL; names are [a-z0-9_]. */
  createDatabase(name: string): Promise<string>;
  /**
   * Stops the server (fast shutdown: open connections are cut) and starts it again on the same port and data;
   * resolves once it accepts connections. `downMs` keeps it down that long in between.
   */
  restart(downMs?: number): Promise<void>;
  dispose(): Promise<void>;
}

export interface StartPostgresOptions {
  /** Bound for initdb, start-up and each psql call (default 60 s; the machine may be busy). */
  timeoutMs?: number;
}

/** The role the platform connects as: it owns its databases (and so their schema) and is no superuser. */
const USER = 'tidepool';
const DATABASE = 'tidepool';
/** The superuser, for this helper's own administration only (over loopback with trust: tests only). */
const SUPERUSER = 'postgres';

/** The SQL that makes the platform's role: may log in, owns what it creates, and nothing more (no superuser, no roles, no databases). */
export function platformRoleSql(user: string, passwordVerifier?: string): string {
  return `CREATE ROLE ${user} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS${passwordVerifier ? ` PASSWORD '${passwordVerifier}'` : ''}`;
}

/**
 * A SCRAM-SHA-256 verifier of `password` (what PostgreSQL stores), so the password itself never appears in a
 * command line or a statement.
 */
export function scramVerifier(password: string, iterations = 4096): string {
  const salt = randomBytes(16);
  const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  const storedKey = createHash('sha256').update(createHmac('sha256', salted).update('Client Key').digest()).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** Directory with initdb/postgres/psql: Debian keeps them in /usr/lib/postgresql/<major>/bin, off PATH. */
export function postgresBinDir(): string {
  const versions = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a)).find((v) => existsSync(join('/usr/lib/postgresql', v, 'bin', 'initdb')));
  if (newest) return join('/usr/lib/postgresql', newest, 'bin');
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'))) return dir;
  throw new Error('testkit: PostgreSQL is not installed (no initdb); run scripts/bootstrap.sh as root, or: sudo apt-get install -y postgresql');
}

/** PostgreSQL refuses to run as root: as root the cluster belongs to the `postgres` user (Debian's package creates it). */
export function serverIdentity(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  let line: string;
  try {
    line = execFileSync('getent', ['passwd', 'postgres'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error("testkit: running as root, PostgreSQL needs an unprivileged user and there is no 'postgres' user (install Debian's postgresql package)");
  }
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

export function runAs(
  file: string,
  args: string[],
  identity: { uid: number; gid: number } | undefined,
  timeoutMs: number,
  input?: string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, args, { encoding: 'utf8', timeout: timeoutMs, uid: identity?.uid, gid: identity?.gid, env: { ...process.env, LC_ALL: 'C' } }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      const why = error.killed ? `timed out after ${timeoutMs} ms` : `failed: ${(stderr || stdout || error.message).trim()}`;
      reject(new Error(`testkit: ${file.split('/').pop()} ${args.slice(0, 3).join(' ')} ${why}`));
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function exited(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * Starts a throwaway PostgreSQL: `initdb` into a temp directory, `postgres` listening on a free
 * 127.0.0.1 port (trust authentication for user `tidepool`, no durability settings: tests only),
 * and a database `tidepool`. Everything is removed on `dispose` (and the server killed if this process exits first).
 */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresServer> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const bin = postgresBinDir();
  const identity = serverIdentity();
  const root = mkdtempSync(join(tmpdir(), 'tidepool-pg-'));
  if (identity) chownSync(root, identity.uid, identity.gid);
  const dataDir = join(root, 'data');
  let server: ChildProcess | undefined;
  const killOnExit = (): void => {
    server?.kill('SIGKILL');
  };
  const stop = async (): Promise<void> => {
    if (server && !(await exited(server, 0))) {
      server.kill('SIGINT'); // fast shutdown: rolls back open transactions, closes connections
      if (!(await exited(server, 10_000))) {
        server.kill('SIGKILL');
        await exited(server, 5_000);
      }
    }
  };
  const cleanUp = async (): Promise<void> => {
    process.off('exit', killOnExit);
    await stop();
    rmSync(root, { recursive: true, force: true });
  };
  try {
    await runAs(join(bin, 'initdb'), ['-D', dataDir, '-U', SUPERUSER, '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync'], identity, timeoutMs);
    const port = await getFreePort();
    let output = '';
    const collect = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-8_000);
    };
    /** Starts the server on `port` and waits until it accepts connections. */
    const launch = async (): Promise<void> => {
      const child = spawn(
        join(bin, 'postgres'),
        ['-D', dataDir, '-p', String(port), '-k', root, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=200'],
        { uid: identity?.uid, gid: identity?.gid, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } },
      );
      server = child;
      child.stdout?.on('data', collect);
      child.stderr?.on('data', collect);
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`testkit: postgres exited during start-up:\n${output.trim()}`);
        const ready = await runAs(join(bin, 'pg_isready'), ['-h', '127.0.0.1', '-p', String(port), '-t', '2'], identity, 5_000).then(
          () => true,
          () => false,
        );
        if (ready) return;
        if (Date.now() > deadline) throw new Error(`testkit: postgres did not accept connections on 127.0.0.1:${port} within ${timeoutMs} ms:\n${output.trim()}`);
        await sleep(100);
      }
    };
    process.on('exit', killOnExit);
    await launch();
    const psql = (database: string, sql: string): Promise<string> =>
      runAs(join(bin, 'psql'), ['-h', '127.0.0.1', '-p', String(port), '-U', SUPERUSER, '-d', database, '-v', 'ON_ERROR_STOP=1', '-qAt', '-c', sql], identity, timeoutMs);
    const urlOf = (database: string): string => `postgres://${USER}@127.0.0.1:${port}/${database}`;
    await psql('postgres', platformRoleSql(USER));
    await psql('postgres', `CREATE DATABASE ${DATABASE} OWNER ${USER}`);
    let disposed: Promise<void> | undefined;
    return {
      url: urlOf(DATABASE),
      port,
      async createDatabase(name) {
        if (!/^[a-z][a-z0-9_]{0,62}$/.test(name)) throw new Error(`testkit: database name '${name}' must be [a-z][a-z0-9_]*, at most 63 characters`);
        await psql('postgres', `CREATE DATABASE ${name} OWNER ${USER}`);
        return urlOf(name);
      },
      async restart(downMs = 0) {
        if (disposed) throw new Error('testkit: postgres was disposed');
        await stop();
        await sleep(downMs);
        await launch();
      },
      dispose() {
        disposed ??= cleanUp();
        return disposed;
      },
    };
  } catch (error) {
    await cleanUp();
    throw error;
  }
}
