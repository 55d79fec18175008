/**
 * What is wrong with settings as read, one line per variable: the variable, what the schema says, the value (unless
 * secret) and the valid forms.
 */
import { KindGuard, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { Setting } from './setting.ts';

/** The valid forms of a value of `schema` in words, or undefined where only a hand-written `forms` can say them. */
export function formsOf(schema: TSchema): string | undefined {
  if (KindGuard.IsInteger(schema)) {
    const { minimum, maximum } = schema;
    if (minimum !== undefined && maximum !== undefined) return `an integer from ${minimum} to ${maximum}`;
    return minimum !== undefined ? `an integer of at least ${minimum}` : 'an integer';
  }
  if (KindGuard.IsBoolean(schema)) return 'on or off (also true/false, yes/no, 1/0)';
  if (KindGuard.IsUnion(schema)) {
    const literals = schema.anyOf.map((member) => (KindGuard.IsLiteral(member) ? member.const : undefined));
    if (!literals.every((literal) => typeof literal === 'string')) return undefined;
    return literals.length === 1 ? literals[0] : `${literals.slice(0, -1).join(', ')} or ${literals.at(-1)}`;
  }
  if (KindGuard.IsArray(schema)) {
    const item = formsOf(schema.items);
    return item ? `a comma list, each ${item}` : undefined;
  }
  return undefined;
}

/** One line per value the schema refuses (an entry of a list: one line each), in the order of `settings`; the first names the valid forms. */
export function settingProblems(settings: Record<string, Setting>, values: Record<string, unknown>): string[] {
  const problems: string[] = [];
  for (const [key, declared] of Object.entries(settings)) {
    const forms = declared.message ? undefined : (declared.forms ?? formsOf(declared.schema));
    [...Value.Errors(declared.schema, values[key])].forEach((error, index) => {
      const got = declared.secret ? '' : ` (got ${JSON.stringify(error.value)})`;
      problems.push(`${declared.env}: ${declared.message ?? error.message}${got}${forms && index === 0 ? `; expected ${forms}` : ''}`);
    });
  }
  return problems;
}
