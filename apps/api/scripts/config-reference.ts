// Writes the settings tables of docs/configuration.md from the settings' declarations (apps/api/src/**/*-settings.ts,
// composed in apps/api/src/config.ts): everything between the reference's two marker lines is replaced, the prose
// around them is left as it is. `pnpm docs:config`; config-reference.test.ts fails while the document differs.
import { readFileSync, writeFileSync } from 'node:fs';
import { SETTINGS_GROUPS } from '../src/config.ts';
import { renderSettingsReference, withSettingsReference } from '../src/settings/settings-reference.ts';

const document = new URL('../../../docs/configuration.md', import.meta.url);
const before = readFileSync(document, 'utf8');
const after = withSettingsReference(before, renderSettingsReference(SETTINGS_GROUPS));
if (after === before) {
  process.stdout.write('docs/configuration.md: the settings reference is up to date\n');
} else {
  writeFileSync(document, after);
  process.stdout.write('docs/configuration.md: settings reference written\n');
}
