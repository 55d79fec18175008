import { type Family, type Table, hookChainsOf, hookRuleProblem, isHookChain, isTable, ownChainPrefix, ruleProblem, tablesOf } from './iptables-vocabulary.ts';

/**
 * The two ways the platform changes the host firewall through its helper container, read against the
 * grammar in iptables-vocabulary.ts: an `iptables` argument list (list a chain, create one of its chains,
 * insert or delete its tagged jump in a built-in chain), and an `iptables-restore --noflush` payload read
 * line by line (table headers, declarations of its own chains, rules appended to / deleted from / flushes
 * and deletions of its own chains, COMMIT).
 */

/** Why `args` (what follows `iptables -w`, or `ip6tables -w` for ipv6) is not a command the platform runs; undefined when it is. */
export function iptablesArgsProblem(args: readonly string[], family: Family = 'ipv4'): string | undefined {
  let table: Table = 'filter';
  let rest = args;
  if (args[0] === '-t') {
    if (!isTable(args[1], family)) return `table ${JSON.stringify(args[1])} is not one the platform uses (${tablesOf(family)})`;
    table = args[1];
    rest = args.slice(2);
  }
  const [command, chain, ...more] = rest;
  switch (command) {
    case '-S':
      // Never the whole table: a named chain of the platform, or a built-in chain it hooks into.
      if ((isHookChain(table, chain, family) || ownChainPrefix(table, chain)) && more.length === 0) return undefined;
      return `iptables -S lists only a named chain of the platform or a built-in chain it hooks into (got ${JSON.stringify(rest.join(' '))})`;
    case '-N':
      return ownChainPrefix(table, chain) && more.length === 0 ? undefined : `iptables -N creates only the platform's chains in ${table} (got ${JSON.stringify(chain)})`;
    case '-I':
      if (!isHookChain(table, chain, family)) return `iptables -I inserts only into ${hookChainsOf(table, family)} (got ${JSON.stringify(chain)})`;
      if (more[0] !== '1') return 'the platform inserts its jump first (position 1)';
      return hookRuleProblem(table, chain, more.slice(1), family);
    case '-D':
      if (!isHookChain(table, chain, family)) return `iptables -D deletes only the platform's jumps from a built-in chain (got ${JSON.stringify(chain)})`;
      return hookRuleProblem(table, chain, more, family);
    default:
      return `iptables ${JSON.stringify(command ?? '')} is not a command the platform runs (-S, -N, -I, -D)`;
  }
}

/** Largest payload the platform could plausibly write (a network's chains, or one sandbox's rules). */
const MAX_RULES = 1024 * 1024;

/**
 * Longest line of a restore payload. iptables-restore reads lines into a 10,240-byte buffer and takes what does
 * not fit as the next line: a padded line would be split and its tail (`-I INPUT -j ACCEPT`) run as a command
 * of its own. The platform's longest lines are about 200 bytes.
 */
export const MAX_RESTORE_LINE = 4096;

/**
 * Splits a rule line the way iptables-restore does for what the platform writes: exactly one space between
 * words (no runs, none leading or trailing, no tabs), and a word fully in double quotes (a comment printed by
 * `iptables -S`) stands for its plain contents. No other quoting or escaping is accepted.
 */
function ruleWords(line: string): string[] | undefined {
  const words: string[] = [];
  for (const word of line.split(' ')) {
    const quoted = /^"([^"'\\ ]*)"$/.exec(word);
    if (quoted) words.push(quoted[1]!);
    else if (/["'\\]/.test(word) || word === '') return undefined;
    else words.push(word);
  }
  return words;
}

/** Why `rules` (fed to `iptables-restore -w --noflush`, or `ip6tables-restore` for ipv6) is not a payload the platform writes; undefined when it is. */
export function restorePayloadProblem(rules: string, family: Family = 'ipv4'): string | undefined {
  if (rules.length > MAX_RULES) return 'the rules are too long';
  const lines = rules.split('\n');
  if (lines.pop() !== '') return 'the rules end with a newline after COMMIT';
  let table: Table | undefined;
  const seenTables = new Set<Table>();
  for (const [index, line] of lines.entries()) {
    const at = `line ${index + 1}`;
    if (Buffer.byteLength(line) > MAX_RESTORE_LINE) return `${at}: longer than ${MAX_RESTORE_LINE} bytes`;
    if (!/^[\x21-\x7e][\x20-\x7e]*$/.test(line)) return `${at}: empty, starting with a space or not printable ASCII`;
    if (line.startsWith('*')) {
      const name = line.slice(1);
      if (table !== undefined) return `${at}: table ${name} opened before COMMIT of ${table}`;
      if (!isTable(name, family)) return `${at}: table ${JSON.stringify(name)} is not one the platform uses (${tablesOf(family)})`;
      if (seenTables.has(name)) return `${at}: table ${name} appears twice`;
      seenTables.add(name);
      table = name;
      continue;
    }
    if (table === undefined) return `${at}: ${JSON.stringify(line.slice(0, 80))} outside a table (*filter … COMMIT)`;
    if (line === 'COMMIT') {
      table = undefined;
      continue;
    }
    if (line.startsWith(':')) {
      const declared = /^:(\S+) - \[0:0\]$/.exec(line);
      if (!declared || !ownChainPrefix(table, declared[1])) return `${at}: only the platform's own chains are declared (":<chain> - [0:0]"), got ${JSON.stringify(line.slice(0, 80))}`;
      continue;
    }
    const words = ruleWords(line);
    if (!words) return `${at}: quoting or spacing the platform does not write (one space between words)`;
    const [command, chain, ...rule] = words;
    if (!ownChainPrefix(table, chain)) return `${at}: chain ${JSON.stringify(chain)} is not one of the platform's in the ${table} table`;
    let problem: string | undefined;
    if (command === '-A' || command === '-D') problem = ruleProblem(table, chain!, rule, family);
    else if (command === '-F' || command === '-X') problem = rule.length === 0 ? undefined : `${command} takes only the chain`;
    else problem = `${JSON.stringify(command)} is not a command the platform writes (-A, -D, -F, -X)`;
    if (problem) return `${at}: ${problem}`;
  }
  if (table !== undefined) return `table ${table} has no COMMIT`;
  if (seenTables.size === 0) return 'no table';
  return undefined;
}
