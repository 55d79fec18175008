import ts from 'typescript';

/** A cell turned into a script that runs in a Node realm and keeps its declarations across cells. */
export interface PreparedCell {
  /** Script text: `var` declarations for the cell's top-level names, then an async IIFE with the body. */
  script: string;
  /** Whether the cell ends with an expression statement (its value is the cell's main result). */
  hasMainResult: boolean;
}

/** A cell that does not parse or transpile; `message` names the first problem and where it is. */
export class CellSyntaxError extends Error {
  override readonly name = 'SyntaxError';
}

export type CellLanguage = 'javascript' | 'typescript';

const COMPILER_OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.CommonJS,
  esModuleInterop: true,
  isolatedModules: true,
};

/** Name of the global helper the worker defines: `m.__esModule ? m.default : m`, for default imports. */
export const DEFAULT_IMPORT_HELPER = '__tidepoolDefaultImport';

/**
 * Turns one notebook cell into a script:
 * - TypeScript (and JavaScript, for `import`) is transpiled to CommonJS (imports become `require`);
 * - top-level `let`/`const`/`var`/`function`/`class` declarations become assignments to `var`s declared
 *   before the body, so they stay visible to later cells (a cell is a function body, for top-level await);
 * - a last expression statement becomes the body's return value (the cell's main result).
 */
export function prepareCell(code: string, language: CellLanguage): PreparedCell {
  const js = transpile(importsToRequires(code, language), language);
  const source = ts.createSourceFile('cell.js', js, ts.ScriptTarget.ES2022, true, ts.ScriptKind.JS);
  const names = new Set<string>();
  const hoistedFunctions: string[] = [];
  const pieces: string[] = [];
  let cursor = 0;
  const statements = source.statements;
  let hasMainResult = false;

  const replace = (node: ts.Node, text: string) => {
    pieces.push(js.slice(cursor, node.getStart(source)), text);
    cursor = node.getEnd();
  };

  statements.forEach((statement, index) => {
    const last = index === statements.length - 1;
    if (ts.isVariableStatement(statement) && !hasModifier(statement, ts.SyntaxKind.DeclareKeyword)) {
      const assignments: string[] = [];
      for (const declaration of statement.declarationList.declarations) {
        collectBindingNames(declaration.name, names);
        if (declaration.initializer) {
          assignments.push(`(${declaration.name.getText(source)} = ${declaration.initializer.getText(source)})`);
        } else if (statement.declarationList.flags & (ts.NodeFlags.Let | ts.NodeFlags.Const)) {
          // `let x;` in a new cell starts x over, as a fresh declaration would.
          if (ts.isIdentifier(declaration.name)) assignments.push(`(${declaration.name.text} = undefined)`);
        }
      }
      replace(statement, assignments.length > 0 ? `${assignments.join(', ')};` : ';');
    } else if (ts.isFunctionDeclaration(statement) && statement.name && statement.body) {
      names.add(statement.name.text);
      hoistedFunctions.push(`${statement.name.text} = ${statement.getText(source)};`);
      replace(statement, '');
    } else if (ts.isClassDeclaration(statement) && statement.name) {
      names.add(statement.name.text);
      replace(statement, `${statement.name.text} = ${statement.getText(source)};`);
    } else if (last && ts.isExpressionStatement(statement)) {
      hasMainResult = true;
      replace(statement, `return (${statement.expression.getText(source)});`);
    }
  });
  pieces.push(js.slice(cursor));

  const declarations = names.size > 0 ? `var ${[...names].join(', ')};\n` : '';
  const body = `${hoistedFunctions.join('\n')}\n${pieces.join('')}`;
  return { script: `${declarations}(async () => {\n${body}\n})()`, hasMainResult };
}

/**
 * Top-level `import`s become `const` declarations of `require` calls under the names the cell wrote
 * (TypeScript's own CommonJS output would rename them, e.g. `fs_1.default`, which later cells cannot see).
 */
export function importsToRequires(code: string, language: CellLanguage): string {
  const kind = language === 'typescript' ? ts.ScriptKind.TS : ts.ScriptKind.JS;
  const source = ts.createSourceFile(language === 'typescript' ? 'cell.ts' : 'cell.js', code, ts.ScriptTarget.ES2022, true, kind);
  const pieces: string[] = [];
  let cursor = 0;
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) continue;
    const from = `require(${JSON.stringify(statement.moduleSpecifier.text)})`;
    const clause = statement.importClause;
    const lines: string[] = [];
    if (!clause) {
      lines.push(`${from};`);
    } else if (!clause.isTypeOnly) {
      if (clause.name) lines.push(`const ${clause.name.text} = ${DEFAULT_IMPORT_HELPER}(${from});`);
      const bindings = clause.namedBindings;
      if (bindings && ts.isNamespaceImport(bindings)) lines.push(`const ${bindings.name.text} = ${from};`);
      if (bindings && ts.isNamedImports(bindings)) {
        const parts = bindings.elements
          .filter((e) => !e.isTypeOnly)
          .map((e) => (e.propertyName ? `${JSON.stringify(e.propertyName.text)}: ${e.name.text}` : e.name.text));
        if (parts.length > 0) lines.push(`const { ${parts.join(', ')} } = ${from};`);
      }
    }
    pieces.push(code.slice(cursor, statement.getStart(source)), lines.join(' '));
    cursor = statement.getEnd();
  }
  pieces.push(code.slice(cursor));
  return pieces.join('');
}

function transpile(code: string, language: CellLanguage): string {
  const output = ts.transpileModule(code, {
    fileName: language === 'typescript' ? 'cell.ts' : 'cell.js',
    reportDiagnostics: true,
    compilerOptions: COMPILER_OPTIONS,
  });
  const problem = output.diagnostics?.find((d) => d.category === ts.DiagnosticCategory.Error);
  if (problem) {
    let where = '';
    if (problem.file && problem.start !== undefined) {
      const { line, character } = problem.file.getLineAndCharacterOfPosition(problem.start);
      where = ` (line ${line + 1}, column ${character + 1})`;
    }
    throw new CellSyntaxError(`${ts.flattenDiagnosticMessageText(problem.messageText, '\n')}${where}`);
  }
  return output.outputText;
}

function hasModifier(node: ts.Node, kind: ts.SyntaxKind): boolean {
  return ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === kind);
}

function collectBindingNames(name: ts.BindingName, into: Set<string>): void {
  if (ts.isIdentifier(name)) {
    into.add(name.text);
    return;
  }
  for (const element of name.elements) {
    if (ts.isOmittedExpression(element)) continue;
    collectBindingNames(element.name, into);
  }
}
