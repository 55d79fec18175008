import { getSignature } from 'e2b';
import { describe, expect, it } from 'vitest';
import type { RoutableSandbox } from './sandbox-directory.ts';
import { fileUrlSignature, findSignedUrlOwner, parseSignedFilesQuery } from './signed-url-owner.ts';

function sandbox(sandboxId: string, envdAccessToken: string): RoutableSandbox {
  return { sandboxId, state: 'running', address: '10.0.0.2', envdAccessToken, trafficAccessToken: null, maskRequestHost: undefined, httpsPorts: [], autoResume: false };
}

describe('fileUrlSignature', () => {
  it('matches the SDK signature, with and without expiration', async () => {
    const sdk = await getSignature({ path: '/home/user/a+b.txt', operation: 'read', user: 'root', envdAccessToken: 'tok' });
    expect(fileUrlSignature('/home/user/a+b.txt', 'read', 'root', 'tok')).toBe(sdk.signature);
    const withExpiry = await getSignature({ path: '', operation: 'write', user: undefined, envdAccessToken: 'tok', expirationInSeconds: 60 });
    expect(fileUrlSignature('', 'write', '', 'tok', withExpiry.expiration!)).toBe(withExpiry.signature);
  });
});

describe('findSignedUrlOwner', () => {
  const a = sandbox('aaa', 'token-a');
  const b = sandbox('bbb', 'token-b');

  it('finds the sandbox whose token signed the URL', () => {
    const sig = fileUrlSignature('/tmp/x', 'read', 'user', 'token-b');
    const url = `/files?username=user&path=%2Ftmp%2Fx&signature=${encodeURIComponent(sig)}`;
    const query = parseSignedFilesQuery('GET', url)!;
    expect(query).toMatchObject({ path: '/tmp/x', username: 'user', operation: 'read', expiration: undefined });
    expect(findSignedUrlOwner(query, [a, b])?.sandboxId).toBe('bbb');
  });

  it('uses the write operation for POST and includes the expiration', () => {
    const sig = fileUrlSignature('', 'write', '', 'token-a', 1795355275);
    const url = `/files?signature=${encodeURIComponent(sig)}&signature_expiration=1795355275`;
    expect(findSignedUrlOwner(parseSignedFilesQuery('POST', url)!, [b, a])?.sandboxId).toBe('aaa');
    expect(findSignedUrlOwner(parseSignedFilesQuery('GET', url)!, [a, b])).toBeUndefined();
  });

  it('finds nobody for a forged signature or a URL without one', () => {
    expect(findSignedUrlOwner(parseSignedFilesQuery('GET', '/files?path=a&signature=v1_nope')!, [a, b])).toBeUndefined();
    expect(parseSignedFilesQuery('GET', '/files?path=a')).toBeUndefined();
  });
});
