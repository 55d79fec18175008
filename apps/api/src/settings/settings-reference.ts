/**
 * The settings tables of docs/configuration.md, written from the settings' declarations: one section per group, one
 * row per variable (and one for its `_FILE` form), between two marker lines that nothing else may change.
 */
import type { SettingsGroup } from './setting.ts';

export const REFERENCE_START = '<!-- settings reference: written by `pnpm docs:config` from the settings modules (apps/api/src/**/*-settings.ts); edit those, not this table -->';
export const REFERENCE_END = '<!-- end of the settings reference -->';

const cell = (markdown: string): string => markdown.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

/** The generated part of the reference, markers included. */
export function renderSettingsReference(groups: readonly SettingsGroup[]): string {
  const lines = [REFERENCE_START];
  for (const group of groups) {
    lines.push('', `### ${group.title}`, '', '| Variable | Default | Meaning |', '|---|---|---|');
    for (const declared of Object.values(group.settings)) {
      const name = `\`${declared.env}\`${declared.formerEnv ? ` (older name: \`${declared.formerEnv}\`)` : ''}`;
      lines.push(`| ${name} | ${cell(declared.default)} | ${cell(declared.description)} |`);
      if (declared.fromFile) lines.push(`| \`${declared.env}_FILE\` | unset | ${cell(declared.fromFile.description)} |`);
    }
  }
  lines.push('', REFERENCE_END);
  return lines.join('\n');
}

/** `document` with its generated part replaced by `generated`; throws when the markers are missing or out of order. */
export function withSettingsReference(document: string, generated: string): string {
  const start = document.indexOf(REFERENCE_START);
  const end = document.indexOf(REFERENCE_END);
  if (start < 0 || end < start) throw new Error(`the document has no settings reference between its markers (${REFERENCE_START} … ${REFERENCE_END})`);
  return document.slice(0, start) + generated + document.slice(end + REFERENCE_END.length);
}
