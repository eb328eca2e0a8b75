import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, basename } from 'node:path';
const roots = ['src', 'test', 'bench', 'scripts', 'docs'];
const files: string[] = [];
const walk = (d: string) => { for (const e of readdirSync(d)) { const p = join(d, e); if (e === 'node_modules' || e === 'results' || e === 'generated') continue; if (statSync(p).isDirectory()) walk(p); else files.push(p); } };
roots.forEach(walk); files.push('README.md', 'Dockerfile', 'compose.yaml');
const all = new Set(files.map((f) => f));
const names = new Set(files.map((f) => basename(f)));
const mention = /(?<![\w@.-])((?:[\w.-]+\/)*[\w.-]+\.ts)\b/g;
for (const f of files.filter((f) => /\.(ts|md|cjs)$/.test(f))) {
  const text = readFileSync(f, 'utf8');
  for (const m of text.matchAll(mention)) {
    const ref = m[1]!;
    if (ref.endsWith('.d.ts')) continue;
    const ok = names.has(basename(ref)) && (ref.indexOf('/') < 0 || files.some((x) => x.endsWith('/' + ref) || x === ref));
    if (!ok) console.log(`${f}: ${ref}`);
  }
}
