import { provisionRootFilesystem } from './provision.ts';

export interface CommandOutput {
  stdout(line: string): void;
  stderr(line: string): void;
}

const processOutput: CommandOutput = {
  stdout: (line) => process.stdout.write(`${line}\n`),
  stderr: (line) => process.stderr.write(`${line}\n`),
};

const USAGE = 'usage: envd provision [-root <dir>]';

/** Exit codes: 0 ready (changed or not), 1 provisioning failed, 2 bad usage. */
export const PROVISION_EXIT = { ok: 0, failed: 1, usage: 2 } as const;

function parseRoot(argv: string[]): string | { error: string } {
  let root = '/';
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].replace(/^-{1,2}/, '-').split('=', 2);
    if (flag === '-root') {
      const value = inline ?? argv[++i];
      if (!value) return { error: '-root needs a directory' };
      root = value;
    } else if (flag === '-h' || flag === '-help') {
      return { error: '' };
    } else {
      return { error: `unknown argument '${argv[i]}'` };
    }
  }
  return root;
}

/**
 * `envd provision [-root <dir>]`: prepares a root filesystem to be a sandbox (see
 * provisionRootFilesystem). Prints one line, `envd provision: ...`, plus one stderr line per
 * warning, so that an image build log stays readable.
 */
export function runProvisionCommand(argv: string[], output: CommandOutput = processOutput): number {
  const root = parseRoot(argv);
  if (typeof root !== 'string') {
    if (root.error) output.stderr(`envd provision: ${root.error}`);
    output.stderr(USAGE);
    return root.error ? PROVISION_EXIT.usage : PROVISION_EXIT.ok;
  }
  try {
    const report = provisionRootFilesystem({ root });
    for (const warning of report.warnings) output.stderr(`envd provision: warning: ${warning}`);
    const { changes } = report;
    output.stdout(changes.length === 0 ? 'envd provision: ready, nothing to change' : `envd provision: ready, ${changes.length} change${changes.length === 1 ? '' : 's'}: ${changes.join(', ')}`);
    return PROVISION_EXIT.ok;
  } catch (error) {
    output.stderr(`envd provision: failed: ${error instanceof Error ? error.message : String(error)}`);
    return PROVISION_EXIT.failed;
  }
}
