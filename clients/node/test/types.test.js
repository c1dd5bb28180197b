'use strict';
// index.d.ts type-checks, and test/usage.ts (how the README uses the client)
// compiles against it under --strict.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');
const { execFileSync } = require('child_process');

test('the TypeScript declarations compile and describe the client', () => {
  const tsc = require.resolve('typescript/bin/tsc');
  const dir = path.join(__dirname, '..');
  try {
    execFileSync(process.execPath, [tsc, '--noEmit', '--strict', '--target', 'es2022',
      '--module', 'commonjs', '--types', 'node', 'index.d.ts', 'test/usage.ts'],
    { cwd: dir, encoding: 'utf8' });
  } catch (err) {
    assert.fail(`tsc: ${err.stdout}${err.stderr}`);
  }
});
