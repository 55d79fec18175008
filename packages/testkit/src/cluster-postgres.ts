/**
 * The local cluster's PostgreSQL: Debian's `postgres`, detached (it outlives the CLI), its data in
 * `<dir>/postgres/data`, listening only on the cluster's bridge address so the node agents in their namespaces
 * and the API replicas on the host reach it there. Network clients need the password (scram-sha-256, only
 * user `tidepool` to database `tidepool`, only from the cluster's /24). `tidepool` is no superuser: it may log in
 * and owns its database (so its schema), nothing more (no roles, no databases, no `pg_authid`). The superuser
 * `postgres` has no password and is reached only through the trusted unix socket, in a directory only root and
 * `postgres` can enter. The password is in `<dir>/postgres/password` (0600), which the API replicas read through
 * TIDEPOOL_DATABASE_PASSWORD_FILE (node agents hold no database settings).
 *
 * Stopped by the postmaster's pid (fast shutdown, then SIGKILL); `down` also kills anything still naming the
 * directory, so a crashed run leaves nothing behind.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClusterError } from './cluster-error.ts';
import { killAll, nodeProcesses } from './cluster-leftovers.ts';
import { platformRoleSql, postgresBinDir, runAs, scramVerifier, serverIdentity } from './postgres-server.ts';
import { isProcessAlive } from './process-alive.ts';

export const CLUSTER_DATABASE = 'tidepool';
export const CLUSTER_DATABASE_USER = 'tidepool';
/** The cluster's superuser: administration over the unix socket only. */
export const CLUSTER_SUPERUSER = 'postgres';

export interface ClusterPostgres {
  /** `postgres://tidepool@<bridge address>:<port>/tidepool` (no password: it is in `passwordFile`). */
  url: string;
  host: string;
  port: number;
  passwordFile: string;
  dir: string;
  logFile: string;
}

interface PostgresFiles {
  dir: string;
  dataDir: string;
  socketDir: string;
  passwordFile: string;
  logFile: string;
}

export function postgresFiles(clusterDir: string): PostgresFiles {
  const dir = join(clusterDir, 'postgres');
  return { dir, dataDir: join(dir, 'data'), socketDir: join(dir, 'run'), passwordFile: join(dir, 'password'), logFile: join(dir, 'postgres.log') };
}

/** The postmaster's pid from its pid file, if that process is alive. */
export function postgresPid(clusterDir: string): number | undefined {
  const { dataDir } = postgresFiles(clusterDir);
  let pid: number;
  try {
    pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
  return Number.isInteger(pid) && pid > 1 && isProcessAlive(pid) ? pid : undefined;
}

function logTail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-8).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * initdb into `<dir>/postgres/data` (user `tidepool` with a random password), then `postgres` on
 * `address:port` (detached), and the database `tidepool`. On failure everything it made is removed.
 */
export async function startClusterPostgres(opts: { clusterDir: string; address: string; subnet: string; port: number; timeoutMs?: number }): Promise<ClusterPostgres> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const bin = postgresBinDir();
  const identity = serverIdentity();
  const files = postgresFiles(opts.clusterDir);
  // PostgreSQL runs as `postgres` (it refuses root): it must be able to pass through the cluster directory.
  chmodSync(opts.clusterDir, 0o711);
  mkdirSync(files.dir, { recursive: true, mode: 0o711 });
  for (const own of [files.dataDir, files.socketDir]) {
    mkdirSync(own, { recursive: true, mode: 0o700 });
    if (identity) chownSync(own, identity.uid, identity.gid);
  }
  const password = randomBytes(18).toString('base64url');
  writeFileSync(files.passwordFile, `${password}\n`, { mode: 0o600 });
  try {
    // The superuser has no password (pg_hba.conf below admits it on the socket only); the API's role is made after.
    await runAs(join(bin, 'initdb'), ['-D', files.dataDir, '-U', CLUSTER_SUPERUSER, '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync'], identity, timeoutMs);
  } catch (error) {
    throw new ClusterError('command', (error as Error).message);
  }
  // Only the cluster's /24, only this user to this database, only with the password; the socket for local admin.
  writeFileSync(
    join(files.dataDir, 'pg_hba.conf'),
    `local all all trust\nhost ${CLUSTER_DATABASE} ${CLUSTER_DATABASE_USER} ${opts.subnet} scram-sha-256\n`,
  );
  const log = openSync(files.logFile, 'a');
  let child;
  try {
    child = spawn(
      join(bin, 'postgres'),
      ['-D', files.dataDir, '-p', String(opts.port), '-k', files.socketDir, '-c', `listen_addresses=${opts.address}`, '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=300'],
      { uid: identity?.uid, gid: identity?.gid, detached: true, stdio: ['ignore', log, log], env: { PATH: process.env.PATH, LC_ALL: 'C' } },
    );
  } finally {
    closeSync(log);
  }
  child.on('error', () => undefined); // reported below by its absence
  child.unref();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ready = await runAs(join(bin, 'pg_isready'), ['-h', opts.address, '-p', String(opts.port), '-t', '2'], identity, 5_000).then(
      () => true,
      () => false,
    );
    if (ready) break;
    if (child.exitCode !== null || child.pid === undefined || !isProcessAlive(child.pid)) {
      throw new ClusterError('command', `postgres exited while starting:\n${logTail(files.logFile)}\n(full log: ${files.logFile})`);
    }
    if (Date.now() > deadline) throw new ClusterError('command', `postgres did not accept connections on ${opts.address}:${opts.port} within ${timeoutMs} ms:\n${logTail(files.logFile)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  // The API's role: its password given as a SCRAM verifier (the password itself is in no command line or statement).
  await clusterPsql(opts.clusterDir, 'postgres', platformRoleSql(CLUSTER_DATABASE_USER, scramVerifier(password)), opts.port);
  await clusterPsql(opts.clusterDir, 'postgres', `CREATE DATABASE ${CLUSTER_DATABASE} OWNER ${CLUSTER_DATABASE_USER}`, opts.port);
  return {
    url: `postgres://${CLUSTER_DATABASE_USER}@${opts.address}:${opts.port}/${CLUSTER_DATABASE}`,
    host: opts.address,
    port: opts.port,
    passwordFile: files.passwordFile,
    dir: files.dir,
    logFile: files.logFile,
  };
}

/** Runs SQL as the superuser over the cluster's unix socket; returns psql's unaligned output. */
export async function clusterPsql(clusterDir: string, database: string, sql: string, port: number): Promise<string> {
  const files = postgresFiles(clusterDir);
  try {
    return await runAs(
      join(postgresBinDir(), 'psql'),
      ['-h', files.socketDir, '-p', String(port), '-U', CLUSTER_SUPERUSER, '-d', database, '-v', 'ON_ERROR_STOP=1', '-qAt', '-c', sql],
      serverIdentity(),
      30_000,
    );
  } catch (error) {
    throw new ClusterError('command', (error as Error).message);
  }
}

/** Stops the cluster's PostgreSQL (fast shutdown, SIGKILL after 15 s) and anything else naming its directory. Idempotent. */
export async function stopClusterPostgres(clusterDir: string): Promise<void> {
  const pid = postgresPid(clusterDir);
  if (pid !== undefined) {
    try {
      process.kill(pid, 'SIGINT');
    } catch {
      // gone already
    }
    const deadline = Date.now() + 15_000;
    while (isProcessAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  }
  await killAll(nodeProcesses({ dir: postgresFiles(clusterDir).dir }));
}
