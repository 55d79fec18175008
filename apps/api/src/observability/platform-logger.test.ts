import { describe, expect, it } from 'vitest';
import { createPlatformLogger } from './platform-logger.ts';

describe('platform logger', () => {
  it('censors secret-carrying fields at the top level and one object down, keeps the rest', () => {
    const lines: string[] = [];
    const logger = createPlatformLogger('debug', { write: (line: string) => void lines.push(line) });
    logger.debug({ value: 'v1', body: { value: 'v2' }, request: { body: 'b3' }, config: { secretsKey: 'k4' }, secretId: 'sec_1' }, 'line');
    const [entry] = lines.map((line) => JSON.parse(line));
    expect(lines.join('')).not.toMatch(/v1|v2|b3|k4/);
    expect(entry).toMatchObject({ value: '[redacted]', body: '[redacted]', request: { body: '[redacted]' }, config: { secretsKey: '[redacted]' }, secretId: 'sec_1', service: 'tidepool-api' });
  });
});
