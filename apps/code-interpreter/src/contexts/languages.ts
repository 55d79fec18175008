/** Languages a context may run, by the name the wire uses. */
export const LANGUAGES = ['python', 'javascript', 'typescript', 'bash'] as const;
export type Language = (typeof LANGUAGES)[number];

const ALIASES = new Map<string, Language>(Object.entries({
  python: 'python',
  python3: 'python',
  py: 'python',
  javascript: 'javascript',
  js: 'javascript',
  node: 'javascript',
  typescript: 'typescript',
  ts: 'typescript',
  bash: 'bash',
  sh: 'bash',
  shell: 'bash',
} satisfies Record<string, Language>));

/** The language a request names (case and surrounding spaces ignored); undefined when it is not supported. */
export function normaliseLanguage(name: string): Language | undefined {
  return ALIASES.get(name.trim().toLowerCase());
}

export const SUPPORTED_LANGUAGES_TEXT = `${LANGUAGES.join(', ')} (also js, ts, sh)`;
