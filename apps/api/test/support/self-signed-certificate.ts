import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/** A throwaway self-signed certificate (PEM key and certificate, valid one day), made with the openssl CLI. */
export async function selfSignedCertificate(commonName: string): Promise<{ key: string; cert: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-cert-'));
  try {
    await promisify(execFile)('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', `/CN=${commonName}`, '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ]);
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
