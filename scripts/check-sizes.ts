/**
 * `npm run check:sizes`: fails (exit 1) naming every file of src/ (src/generated/ aside) over 350
 * lines and every function of src/server/ over 80, as path:line and length. A file that long, or
 * a function, usually holds several rooms: split it by concern, not by size. A function
 * is anything with a body (a declaration, an expression, an arrow function, a method, a
 * constructor, an accessor, a class static block), measured by the TypeScript compiler's parse:
 * the lines its node spans, from its first line to its last, its doc comment left out.
 */
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const MAX_FILE_LINES = 350;
export const MAX_FUNCTION_LINES = 80;

/** A function of a file: a name to find it by, the line it starts on (1-based) and the lines it spans. */
export interface FunctionSize {
  readonly name: string;
  readonly line: number;
  readonly lines: number;
}

/**
 * The lines of `text`, as `wc -l` counts them for a file that ends with a newline (a last line without one counts too).
 */
export function lineCount(text: string): number {
  if (text === '') return 0;
  const newlines = text.split('\n').length - 1;
  return text.endsWith('\n') ? newlines : newlines + 1;
}

type WithBody = ts.FunctionLikeDeclaration | ts.ClassStaticBlockDeclaration;

function hasBody(node: ts.Node): node is WithBody {
  if (ts.isClassStaticBlockDeclaration(node)) return true;
  const functionLike =
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node);
  // An overload or an abstract method has no body: nothing runs there.
  return functionLike && node.body !== undefined;
}

/** What a function is called where it stands: its own name, or the name it is assigned to. */
function nameOf(node: WithBody, source: ts.SourceFile): string {
  if (ts.isClassStaticBlockDeclaration(node)) return 'static {}';
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const accessor = ts.isGetAccessorDeclaration(node) ? 'get ' : ts.isSetAccessorDeclaration(node) ? 'set ' : '';
  if (node.name !== undefined) return accessor + node.name.getText(source);
  const { parent } = node;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyDeclaration(parent) || ts.isPropertyAssignment(parent))
    return parent.name.getText(source);
  return ts.isArrowFunction(node) ? '(arrow function)' : '(function expression)';
}

/** Every function of the TypeScript `text` (nested ones too, each on its own), in the order they start. */
export function functionSizes(fileName: string, text: string): FunctionSize[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const sizes: FunctionSize[] = [];
  const visit = (node: ts.Node): void => {
    if (hasBody(node)) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      sizes.push({ name: nameOf(node, source), line: first + 1, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return sizes;
}

/** What is over a bound in the files of src/, one line each (`path:line what, length`), in path order. */
function oversized(root: string): string[] {
  const found: string[] = [];
  const files = readdirSync(join(root, 'src'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(root, join(entry.parentPath, entry.name)).split(sep).join('/'))
    .filter((path) => !path.startsWith('src/generated/'))
    .sort();
  for (const path of files) {
    const text = readFileSync(join(root, path), 'utf8');
    const lines = lineCount(text);
    if (lines > MAX_FILE_LINES) found.push(`${path}:1 the file, ${lines} lines (at most ${MAX_FILE_LINES})`);
    if (!path.startsWith('src/server/') || !/\.[cm]?tsx?$/.test(path)) continue;
    for (const { name, line, lines } of functionSizes(path, text)) {
      if (lines > MAX_FUNCTION_LINES)
        found.push(`${path}:${line} ${name}, ${lines} lines (at most ${MAX_FUNCTION_LINES})`);
    }
  }
  return found;
}

function main(): void {
  const found = oversized(fileURLToPath(new URL('..', import.meta.url)));
  if (found.length === 0) {
    process.stdout.write(
      `every file of src/ within ${MAX_FILE_LINES} lines, every function of src/server/ within ${MAX_FUNCTION_LINES}\n`,
    );
    return;
  }
  process.stdout.write(`${found.join('\n')}\n${found.length} over a bound: split them by concern\n`);
  process.exitCode = 1;
}

// Run only as a script (`tsx scripts/check-sizes.ts`), not when imported by a test.
const invokedAs = process.argv[1];
if (invokedAs !== undefined && realpathSync(invokedAs) === realpathSync(fileURLToPath(import.meta.url))) main();
