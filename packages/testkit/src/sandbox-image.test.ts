import { describe, expect, it } from 'vitest';
import { sandboxDockerfile, sandboxImageName } from './sandbox-image.ts';

describe('sandbox images', () => {
  it('are named after the image they are built from', () => {
    expect(sandboxImageName('tidepool/test-busybox:latest')).toBe('tidepool/test-busybox-sandbox:latest');
    expect(sandboxImageName('tidepool/debian:bookworm')).toBe('tidepool/debian-sandbox:bookworm');
    expect(sandboxImageName('localhost:5000/img')).toBe('localhost:5000/img-sandbox:latest');
  });

  it('copy the runtime in and provision in exec form (no shell needed)', () => {
    const dockerfile = sandboxDockerfile('busybox:x', 'tidepool/envd-runtime:abc', 'h1');
    expect(dockerfile).toContain('FROM tidepool/envd-runtime:abc AS runtime\nFROM busybox:x\nUSER root\nCOPY --from=runtime /opt/tidepool /opt/tidepool\n');
    expect(dockerfile).toContain('RUN ["/opt/tidepool/bin/envd", "provision"]');
    expect(dockerfile).toContain('CMD ["/opt/tidepool/bin/envd"]');
    expect(dockerfile).toContain('LABEL dev.tidepool.image-hash=h1');
  });
});
