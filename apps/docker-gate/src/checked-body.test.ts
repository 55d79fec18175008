import { describe, expect, it } from 'vitest';
import { BodyRefused, checkedBody } from './checked-body.ts';

const settings = { bindRoots: ['/srv/volumes'], helperImage: 'tidepool/base:latest', runtimes: ['runc'] };
const labels = { 'dev.tidepool.platform-id': 'p1' };

function refusal(check: Parameters<typeof checkedBody>[0], text: string): BodyRefused {
  try {
    checkedBody(check, Buffer.from(text), settings);
  } catch (error) {
    if (error instanceof BodyRefused) return error;
    throw error;
  }
  throw new Error(`not refused: ${text}`);
}

describe('checkedBody', () => {
  it('forwards the checked value serialised again, not the bytes the client sent', () => {
    const text = `{ "Image" : "tidepool/base:latest",\n  "Labels": ${JSON.stringify(labels)}, "HostConfig": {"Memory": 1e9, "NetworkMode":  "none"} }`;
    const forwarded = checkedBody('container-create', Buffer.from(text), settings);
    expect(forwarded.toString()).toBe(JSON.stringify({ Image: 'tidepool/base:latest', Labels: labels, HostConfig: { Memory: 1e9, NetworkMode: 'none' } }));
    expect(checkedBody('exec-create', Buffer.from('{"Cmd":["id"],\t"AttachStdout":true}'), settings).toString()).toBe('{"Cmd":["id"],"AttachStdout":true}');
    expect(checkedBody('empty', Buffer.from(' {} '), settings).length).toBe(0);
  });

  it('refuses repeated keys with 400 before looking at the value', () => {
    const smuggled = `{"Image":"tidepool/base:latest","Labels":${JSON.stringify(labels)},"HostConfig":{"Privileged":true,"Binds":["/:/host"]},"HostConfig":{}}`;
    expect(refusal('container-create', smuggled)).toMatchObject({ status: 400, message: expect.stringMatching(/repeats the key "HostConfig"/) });
    expect(refusal('container-create', smuggled.replace('},"HostConfig"', '},"hostconfig"'))).toMatchObject({ status: 400 });
    expect(refusal('exec-create', '{"Cmd":["id"],"Privileged":true,"privileged":false}')).toMatchObject({ status: 400 });
    expect(refusal('network-create', '{"Name":"n","Driver":"bridge","Driver":"macvlan"}')).toMatchObject({ status: 400 });
  });

  it('refuses malformed JSON with 400 and disallowed values with 403', () => {
    expect(refusal('container-create', '{"Image": ')).toMatchObject({ status: 400 });
    expect(refusal('container-create', '\ufeff{}')).toMatchObject({ status: 400 });
    expect(refusal('container-create', JSON.stringify({ Image: 'x', Labels: labels, HostConfig: { Privileged: true } }))).toMatchObject({ status: 403 });
    expect(refusal('empty', '{"HostConfig":{"Privileged":true}}')).toMatchObject({ status: 403 });
  });
});
