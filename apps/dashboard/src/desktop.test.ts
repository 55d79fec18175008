import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { describeStreamEnd, isDesktopSandbox, STREAM_EXIT, STREAM_SCRIPT, streamPassword, streamUrl } from './desktop.ts';

describe('isDesktopSandbox', () => {
  it('knows the desktop template by id or alias, nothing else', () => {
    expect(isDesktopSandbox({ templateID: 'desktop' })).toBe(true);
    expect(isDesktopSandbox({ templateID: 'x1y2', alias: 'desktop' })).toBe(true);
    expect(isDesktopSandbox({ templateID: 'base' })).toBe(false);
    expect(isDesktopSandbox({ templateID: 'code-interpreter-v1', alias: 'code-interpreter-v1' })).toBe(false);
    expect(isDesktopSandbox({ templateID: 'my-desktop' })).toBe(false);
  });
});

describe('streamPassword', () => {
  it('is 8 characters of an unambiguous alphabet, different each time', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const password = streamPassword();
      expect(password).toMatch(/^[A-HJ-NP-Za-km-z2-9]{8}$/);
      seen.add(password);
    }
    expect(seen.size).toBe(200);
  });

  it('skips bytes that would bias the choice, and draws again when too many were skipped', () => {
    let calls = 0;
    const random = (bytes: Uint8Array): Uint8Array => {
      calls++;
      // First draw: only bytes above the rejection limit (all skipped); then bytes 0..15.
      bytes.set(calls === 1 ? bytes.map(() => 255) : bytes.map((_, i) => i));
      return bytes;
    };
    expect(streamPassword(random)).toBe('ABCDEFGH');
    expect(calls).toBe(2);
  });
});

describe('streamUrl', () => {
  const base = { sandboxID: 'abc123', sandboxDomain: 'tidepool.localhost', password: 'Pw3xYz9Q' };

  it('is noVNC on the sandbox host at this page\'s scheme and port, the password in the fragment only', () => {
    const url = new URL(streamUrl({ ...base, page: { protocol: 'http:', port: '3000' } }));
    expect(url.origin).toBe('http://6080-abc123.tidepool.localhost:3000');
    expect(url.pathname).toBe('/vnc.html');
    expect(url.searchParams.get('autoconnect')).toBe('true');
    expect(url.searchParams.get('resize')).toBe('scale');
    expect(url.searchParams.has('password')).toBe(false);
    expect(new URLSearchParams(url.hash.slice(1)).get('password')).toBe('Pw3xYz9Q');
    expect(new URL(streamUrl({ ...base, page: { protocol: 'https:', port: '' } })).origin).toBe('https://6080-abc123.tidepool.localhost');
  });

  it('uses the platform\'s public domain (HTTPS, its port) when there is one', () => {
    const url = new URL(streamUrl({ ...base, sandboxDomain: 'tidepool.example.com', publicDomain: 'tidepool.example.com:8443', page: { protocol: 'http:', port: '3000' } }));
    expect(url.origin).toBe('https://6080-abc123.tidepool.example.com:8443');
  });
});

describe('describeStreamEnd', () => {
  it('says the script\'s own reason for its known exits', () => {
    expect(describeStreamEnd(STREAM_EXIT.displayRestarting, 'the X display :0 is not running (its Xvfb exited); it is being started again: retry in a few seconds\n')).toBe(
      'The X display :0 is not running (its Xvfb exited); it is being started again: retry in a few seconds.',
    );
    expect(describeStreamEnd(STREAM_EXIT.noDisplay, 'warning\nno X display :0 runs in this sandbox\n')).toBe('No X display :0 runs in this sandbox.');
    expect(describeStreamEnd(STREAM_EXIT.vncEnded, '')).toBe('The desktop stream ended (exit code 15).');
  });

  it('a clean end is a stop; anything else names the status and the last error line', () => {
    expect(describeStreamEnd(0, '')).toBe('The desktop stream was stopped.');
    expect(describeStreamEnd(-1, 'x11vnc: caught signal\n', 'signal: killed')).toBe('The desktop stream ended (signal: killed): x11vnc: caught signal.');
    expect(describeStreamEnd(2, '')).toBe('The desktop stream ended (exit code 2).');
  });
});

describe('STREAM_SCRIPT', () => {
  it('is valid bash and never puts the password on a command line', () => {
    const check = spawnSync('bash', ['-n'], { input: STREAM_SCRIPT, encoding: 'utf8' });
    expect(check.stderr).toBe('');
    expect(check.status).toBe(0);
    // x11vnc on a unix socket only: no TCP port, not even loopback (envd forwards those to the sandbox's address).
    expect(STREAM_SCRIPT).toMatch(/x11vnc -display "\$display" -rfbport 0 -rfbportv6 -1 -unixsock /);
    expect(STREAM_SCRIPT).toContain('-passwdfile "$pwfile"');
    expect(STREAM_SCRIPT).not.toMatch(/-nopw|-passwd "\$TIDEPOOL|-storepasswd/);
    expect(STREAM_SCRIPT).toContain('unset TIDEPOOL_DESKTOP_PASSWORD');
  });
});
