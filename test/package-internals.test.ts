import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * The gateway uses its dependencies through what they publish: a file inside a package that its
 * package.json does not export (`undici/lib/dispatcher/pool.js`) can move in any release that a
 * caret range lets in. Every module name in src/ (imports, dynamic imports, require and
 * createRequire calls) is read here, and a name with a path inside its package must be one of
 * the package's `exports`.
 */

const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Module names in `text`: after `from`, in `import(…)`, `require(…)`, and a call of what createRequire returned. */
function moduleNames(text: string): string[] {
  return [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|\)\s*\(\s*)['"]([^'"]+)['"]/g)].map(
    (match) => match[1]!,
  );
}

/**
 * The package and the path inside it of a bare module name (`@scope/name/sub`, `name/sub`); undefined for a relative or
 * a built-in one.
 */
function packagePath(name: string): { readonly packageName: string; readonly subpath: string } | undefined {
  if (name.startsWith('.') || name.startsWith('/') || name.startsWith('node:')) return undefined;
  const parts = name.split('/');
  const length = name.startsWith('@') ? 2 : 1;
  return { packageName: parts.slice(0, length).join('/'), subpath: parts.slice(length).join('/') };
}

/**
 * Whether `subpath` is one of the package's exports (`./sub` or a `./dir/*` pattern); a package without an `exports`
 * map publishes none.
 */
function exported(exports: unknown, subpath: string): boolean {
  if (typeof exports !== 'object' || exports === null || Array.isArray(exports)) return false;
  const wanted = `./${subpath}`;
  return Object.keys(exports).some((key) => {
    if (key === wanted) return true;
    const star = key.indexOf('*');
    return star >= 0 && wanted.startsWith(key.slice(0, star)) && wanted.endsWith(key.slice(star + 1));
  });
}

describe('dependencies used through what they publish', () => {
  it('reads module names and tells a file inside a package from the package itself', () => {
    expect(
      moduleNames(
        `import { Pool } from 'undici';\nconst p = createRequire(import.meta.url)('undici/lib/dispatcher/pool.js');\nawait import("./x.js");`,
      ),
    ).toEqual(['undici', 'undici/lib/dispatcher/pool.js', './x.js']);
    expect(packagePath('undici/lib/dispatcher/pool.js')).toEqual({
      packageName: 'undici',
      subpath: 'lib/dispatcher/pool.js',
    });
    expect(packagePath('@graphql-yoga/plugin-apq')).toEqual({ packageName: '@graphql-yoga/plugin-apq', subpath: '' });
    expect(packagePath('node:module')).toBeUndefined();
    expect(exported({ '.': './index.js', './package.json': './package.json' }, 'lib/cluster.js')).toBe(false);
    expect(exported({ './plugins/*': './dist/plugins/*.js' }, 'plugins/relay')).toBe(true);
    expect(exported(undefined, 'lib/dispatcher/pool.js')).toBe(false);
  });

  it('src/ imports no file inside a package that the package does not export', () => {
    const internal: string[] = [];
    for (const file of sourceFiles(join(root, 'src'))) {
      for (const name of moduleNames(readFileSync(file, 'utf8'))) {
        const inside = packagePath(name);
        if (inside === undefined || inside.subpath === '') continue;
        const manifest = JSON.parse(
          readFileSync(join(root, 'node_modules', inside.packageName, 'package.json'), 'utf8'),
        ) as { exports?: unknown };
        if (!exported(manifest.exports, inside.subpath)) internal.push(`${file.slice(root.length + 1)}: ${name}`);
      }
    }
    expect(
      internal,
      "use the package's public API, or pin it to an exact version in package.json with a test that fails when an upgrade moves the file",
    ).toEqual([]);
  });
});
