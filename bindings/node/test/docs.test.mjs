// The JavaScript snippets of the documentation are valid programs in the
// module system they use: `node --check` on each, as CommonJS when it
// calls require(), as an ES module when it has import statements.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { packageDir } from './helpers.mjs';

const repoRoot = path.resolve(packageDir, '..', '..');

/** The ```js blocks of a Markdown file (of one of its sections, if given). */
function jsBlocks(file, section = null) {
  let text = fs.readFileSync(file, 'utf8');
  if (section !== null) {
    const start = text.indexOf(`\n## ${section}\n`);
    assert.ok(start >= 0, `${file} has a section ${section}`);
    const end = text.indexOf('\n## ', start + 1);
    text = text.slice(start, end < 0 ? undefined : end);
  }
  return [...text.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

function moduleKind(code) {
  const lines = code.split('\n').map((line) => line.replace(/\/\/.*$/, ''));
  return lines.some((line) => /^\s*import\s/.test(line)) ? 'mjs' : 'cjs';
}

function checkSyntax(code, name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'blitz-docs-'));
  const file = path.join(dir, `${name}.${moduleKind(code)}`);
  try {
    fs.writeFileSync(file, code);
    execFileSync(process.execPath, ['--check', file], { stdio: 'pipe' });
    return null;
  } catch (error) {
    return `${path.basename(file)}: ${String(error.stderr || error.message).trim()}`;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

for (const [label, file, section] of [
  ['bindings/node/README.md', path.join(packageDir, 'README.md'), null],
  ["README.md's Node.js section", path.join(repoRoot, 'README.md'), 'Node.js'],
]) {
  test(`the JavaScript snippets of ${label} parse in their module system`, () => {
    const blocks = jsBlocks(file, section);
    assert.ok(blocks.length > 0, 'the file has JavaScript snippets');
    const errors = blocks.map((code, i) => checkSyntax(code, `snippet-${i + 1}`)).filter(Boolean);
    assert.deepEqual(errors, []);
  });
}
