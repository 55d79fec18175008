/**
 * The agent's egress routes over its real mutual-TLS listener (loopback, a runtime that is never called): secrets are
 * pushed for one sandbox and read back only for it, a CA is per sandbox, forgetting drops both, malformed pushes are
 * 400s that echo no value, and nothing reaches the routes without a client certificate of the cluster CA.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureClusterTls, ensureNodeServerTls } from '@tidepool/testkit';
import { NodeChannelError } from '../src/nodes/node-channel-errors.ts';
import { connectRemoteNode, type RemoteNode } from '../src/nodes/remote-node.ts';
import type { SandboxRuntime } from '../src/runtime/sandbox-runtime.ts';
import { SandboxCertificateAuthorities } from '../src/tls/sandbox-ca.ts';
import { type AgentServer, createAgentServer } from '../src/node-agent/agent-server.ts';
import { EgressSecretStore, parseSecretPush } from '../src/node-agent/egress-secrets.ts';

const dir = mkdtempSync(join(tmpdir(), 'tp-agent-egress-'));
const VALUE = 'sk-agent-egress-4f1d9c27b3';
let logged = '';
const logger = pino({ level: 'debug' }, new Writable({ write: (chunk, _encoding, done) => ((logged += String(chunk)), done()) }));
const secrets = new EgressSecretStore();
const authorities = new SandboxCertificateAuthorities(join(dir, 'data'), logger);
let agent: AgentServer;
let node: RemoteNode;
let url: string;
let tls: { ca: Buffer; cert: Buffer; key: Buffer };
let serverTls: { ca: Buffer; cert: Buffer; key: Buffer };

/** A raw HTTPS request to the agent with the given client identity (none: no certificate). */
function raw(method: string, path: string, body: string | undefined, identity?: { cert: Buffer; key: Buffer }): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const target = new URL(path, url);
    const req = request(
      { hostname: target.hostname, port: target.port, path: target.pathname, method, ca: tls.ca, ...(identity ?? {}), headers: body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

beforeAll(async () => {
  const files = await ensureClusterTls(join(dir, 'tls'));
  const server = await ensureNodeServerTls(join(dir, 'tls'), 'egress-node', '127.0.0.1');
  tls = { ca: readFileSync(files.ca), cert: readFileSync(files.cert), key: readFileSync(files.key) };
  serverTls = { ca: readFileSync(server.ca), cert: readFileSync(server.cert), key: readFileSync(server.key) };
  const runtime = {} as SandboxRuntime;
  agent = createAgentServer({ nodeId: 'egress-node', version: '2', runtime, capacity: async () => ({ cpuCount: 1, memoryMB: 1, memoryAvailableMB: 1 }), tls: serverTls, logger, egress: { secrets, authorities, logger } });
  await new Promise<void>((resolve) => agent.server.listen(0, '127.0.0.1', resolve));
  url = `https://127.0.0.1:${(agent.server.address() as AddressInfo).port}`;
  node = connectRemoteNode({ nodeId: 'egress-node', url, tls });
}, 60_000);

afterAll(async () => {
  node?.close();
  await agent?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('parseSecretPush', () => {
  it('takes {"secrets": {name: value}} and nothing else', () => {
    expect([...parseSecretPush({ secrets: { 'openai-key': 'v', tok_2: 'w' } })]).toEqual([['openai-key', 'v'], ['tok_2', 'w']]);
    expect(parseSecretPush({ secrets: {} }).size).toBe(0);
    for (const bad of [null, [], 'x', {}, { secrets: [] }, { secrets: 'a' }, { secrets: {}, rules: {} }, { secrets: { 'Upper': 'v' } }, { secrets: { 'a b': 'v' } }, { secrets: { '': 'v' } }, { secrets: { a: '' } }, { secrets: { a: 1 } }, { secrets: { a: 'x'.repeat(64 * 1024 + 1) } }]) {
      expect(() => parseSecretPush(bad), JSON.stringify(bad).slice(0, 60)).toThrow(NodeChannelError);
    }
  });
});

describe('EgressSecretStore', () => {
  it('answers a sandbox\'s own values only, replaces them whole, forgets them', () => {
    const store = new EgressSecretStore();
    store.set('sbx_a', new Map([['tok', 'a1'], ['other', 'a2']]));
    store.set('sbx_b', new Map([['tok', 'b1']]));
    expect(store.value('sbx_a', 'TOK')).toBe('a1');
    expect(store.value('sbx_b', 'tok')).toBe('b1');
    expect(store.value('sbx_b', 'other')).toBeUndefined();
    expect(store.value('sbx_c', 'tok')).toBeUndefined();
    store.set('sbx_a', new Map([['tok', 'a3']]));
    expect(store.value('sbx_a', 'other')).toBeUndefined();
    expect(store.value('sbx_a', 'tok')).toBe('a3');
    store.set('sbx_b', new Map());
    store.forget('sbx_a');
    expect(store.size).toBe(0);
  });
});

describe('the agent\'s egress routes (mutual TLS)', () => {
  it('a push reaches that sandbox alone; its CA is its own; forgetting drops both', async () => {
    await node.egress!.pushSecrets!('sbx_one', { tok: VALUE });
    expect(secrets.value('sbx_one', 'tok')).toBe(VALUE);
    expect(secrets.value('sbx_two', 'tok')).toBeUndefined();
    const one = await node.egress!.caCertificate('sbx_one');
    const two = await node.egress!.caCertificate('sbx_two');
    expect(one).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(two).not.toBe(one);
    expect(await node.egress!.caCertificate('sbx_one')).toBe(one);
    // The key stays on the node's disk, 0600.
    expect(readFileSync(join(dir, 'data', 'sandbox-ca', 'sbx_one', 'ca.key'), 'utf8')).toMatch(/PRIVATE KEY/);
    await node.egress!.forget('sbx_one');
    expect(secrets.value('sbx_one', 'tok')).toBeUndefined();
    expect(await node.egress!.caCertificate('sbx_one')).not.toBe(one);
    await node.egress!.forget('sbx_one');
    await node.egress!.forget('sbx_two');
  });

  it('refuses malformed pushes and sandbox ids with a 400, echoing no value', async () => {
    for (const [path, body] of [
      ['/v1/egress/sbx_x', JSON.stringify({ secrets: { tok: VALUE }, extra: 1 })],
      ['/v1/egress/sbx_x', JSON.stringify({ secrets: { 'BAD NAME': VALUE } })],
      ['/v1/egress/sbx_x', JSON.stringify({ secrets: { tok: [VALUE] } })],
      ['/v1/egress/sbx_x', 'not json'],
      ['/v1/egress/..%2Fetc', JSON.stringify({ secrets: {} })],
      ['/v1/egress/a.b', JSON.stringify({ secrets: {} })],
      ['/v1/egress/sbx_x/ca', JSON.stringify({ secrets: {} })],
    ] as const) {
      const answer = await raw('POST', path, body, tls);
      expect(answer.status, `${path} ${body.slice(0, 40)}`).toBe(400);
      expect(JSON.parse(answer.text).error.code).toBe('bad_call');
      expect(answer.text).not.toContain(VALUE);
    }
    expect(secrets.value('sbx_x', 'tok')).toBeUndefined();
    await expect(node.egress!.pushSecrets!('bad/id', {})).rejects.toBeInstanceOf(NodeChannelError);
  });

  it('nothing without a client certificate of the cluster CA: no certificate fails the handshake, a node\'s server certificate is dropped', async () => {
    const body = JSON.stringify({ secrets: { tok: 'injected' } });
    await expect(raw('POST', '/v1/egress/sbx_evil', body)).rejects.toThrow();
    await expect(raw('POST', '/v1/egress/sbx_evil', body, { cert: serverTls.cert, key: serverTls.key })).rejects.toThrow();
    expect(secrets.value('sbx_evil', 'tok')).toBeUndefined();
  });

  it('never logs a pushed value', () => {
    expect(logged).toContain('egress secrets pushed');
    expect(logged).not.toContain(VALUE);
  });
});
