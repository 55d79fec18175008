import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AgentPolicy, agentBindProblem as volumeBindProblem, PolicyRefusal } from './agent-policy.ts';

const dir = mkdtempSync(join(tmpdir(), 'tp-agent-policy-'));
const localRoot = join(dir, 'volumes');
const hostRoot = '/srv/tidepool/volumes';
const roots = { hostRoot, localRoot };
const vol = (seed: string): string => `vol_${`${seed}${'0'.repeat(20)}`.slice(0, 20)}`;
mkdirSync(join(localRoot, vol('real')), { recursive: true });
symlinkSync('/', join(localRoot, vol('link')));
writeFileSync(join(localRoot, vol('file')), 'x');
symlinkSync('/', join(localRoot, vol('real'), 'escape'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const labels = new Map<string, Record<string, string>>([
  ['mine', { 'dev.tidepool.platform-id': 'node-a' }],
  ['other', { 'dev.tidepool.platform-id': 'node-b' }],
  ['bare', {}],
]);
const tags = new Map<string, string[]>([
  [`sha256:${'a'.repeat(64)}`, ['tidepool/layer:x', 'tidepool/template:y']],
  [`sha256:${'b'.repeat(64)}`, ['tidepool/layer:x', 'debian:bookworm']],
  [`sha256:${'c'.repeat(64)}`, ['<none>:<none>']],
]);
const policy = new AgentPolicy({
  volumes: roots,
  platformId: 'node-a',
  registryPrefix: 'registry.example:5000/tidepool',
  containerLabels: async (id) => labels.get(id),
  imageTags: async (reference) => tags.get(reference),
});

async function refusal(promise: Promise<void>): Promise<PolicyRefusal> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(PolicyRefusal);
  expect((error as PolicyRefusal).code).toBe('bad_call');
  return error as PolicyRefusal;
}

describe('the node agent policy', () => {
  it('binds only volume directories the agent made: exactly <root>/vol_<id>, a real directory read with lstat', () => {
    expect(volumeBindProblem(`${hostRoot}/${vol('real')}`, roots)).toBeUndefined();
    expect(volumeBindProblem(`${hostRoot}/${vol('real')}/escape`, roots)).toContain('symbolic link');
    expect(volumeBindProblem(`${hostRoot}/${vol('real')}/escape/etc`, roots)).toContain('symbolic link');
    mkdirSync(join(localRoot, vol('real'), 'inner'), { recursive: true });
    expect(volumeBindProblem(`${hostRoot}/${vol('real')}/inner`, roots)).toContain('not a volume directory');
    expect(volumeBindProblem(`${hostRoot}/${vol('link')}`, roots)).toContain('symbolic link');
    expect(volumeBindProblem(`${hostRoot}/${vol('file')}`, roots)).toContain('not a directory');
    expect(volumeBindProblem(`${hostRoot}/${vol('none')}`, roots)).toContain('does not exist');
    expect(volumeBindProblem('/etc', roots)).toContain('outside the allowed bind roots');
    expect(volumeBindProblem(hostRoot, roots)).toContain('outside the allowed bind roots');
    expect(volumeBindProblem(`${hostRoot}/${vol('real')}`, { hostRoot, localRoot: join(dir, 'unseen') })).toContain('this node cannot see the bind root');
    expect(volumeBindProblem(`${hostRoot}/../${vol('real')}`, roots)).toContain('not a plain absolute path');
    expect(volumeBindProblem(`${hostRoot}/${vol('real')}/`, roots)).toContain('not a plain absolute path');
    expect(volumeBindProblem(`${hostRoot}/${vol('real')}`, undefined)).toContain('binds no host directories');
  });

  it('refuses a start whose directories are not its volumes, with the bind_source reason', async () => {
    const spec = { sandboxId: 's', templateId: 't', image: 'tidepool/template:x', cpuCount: 1, memoryMB: 64, envdAccessToken: 'x' };
    await policy.checkRuntimeCall('startContainer', [{ ...spec, directories: [{ source: `${hostRoot}/${vol('real')}`, target: '/data' }] }]);
    const refused = await refusal(policy.checkRuntimeCall('startContainer', [{ ...spec, directories: [{ source: `${hostRoot}/${vol('link')}`, target: '/data' }] }]));
    expect(refused.reason).toBe('bind_source');
  });

  it("acts on containers of the node's own platform only; a missing one is the runtime's to answer", async () => {
    await policy.checkRuntimeCall('pause', ['mine']);
    await policy.checkRuntimeCall('remove', ['gone']);
    for (const id of ['other', 'bare']) {
      for (const method of ['pause', 'unpause', 'remove', 'inspect', 'commitSandbox']) expect((await refusal(policy.checkRuntimeCall(method, [id, 'x']))).reason).toBe('container');
    }
  });

  it("writes, pushes and removes image names only in the platform's repositories or under the registry prefix", async () => {
    for (const name of ['tidepool/template:a', 'tidepool/paused:s', 'docker.io/tidepool/snapshot:x', 'tidepool/layer:k', 'registry.example:5000/tidepool/template:b']) {
      await policy.checkRuntimeCall('tagImage', ['tidepool/base:latest', name]);
      await policy.checkImageCall('removeImage', [name]);
    }
    for (const name of ['debian:bookworm', 'tidepool/base:latest', 'tidepool/templates:x', 'registry.example:5000/other:x', 'evil.example/tidepool/template:x']) {
      expect((await refusal(policy.checkRuntimeCall('tagImage', ['tidepool/template:a', name]))).reason).toBe('image_name');
      expect((await refusal(policy.checkImageCall('tagImage', ['tidepool/template:a', name]))).reason).toBe('image_name');
      expect((await refusal(policy.checkRuntimeCall('removeImage', [name]))).reason).toBe('image_name');
      expect((await refusal(policy.checkRuntimeCall('commit', ['mine', name]))).reason).toBe('image_name');
      expect((await refusal(policy.checkRuntimeCall('pushImage', [name, 'template:x']))).reason).toBe('image_name');
    }
    // by id: only when every name the image carries is the platform's (an untagged one carries none)
    await policy.checkImageCall('removeImage', [`sha256:${'a'.repeat(64)}`]);
    await policy.checkImageCall('removeImage', [`sha256:${'c'.repeat(64)}`]);
    expect((await refusal(policy.checkImageCall('removeImage', [`sha256:${'b'.repeat(64)}`]))).message).toContain('debian:bookworm');
    // an id is never a name to write
    await refusal(policy.checkRuntimeCall('tagImage', ['tidepool/template:a', 'a'.repeat(64)]));
  });
});
