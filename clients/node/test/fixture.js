'use strict';
// A real memoryd for the tests: tests/clients/memoryd_fixture (path in
// $MEMORYD_FIXTURE, as the Bazel test passes it) starts one on a throw-away
// database and prints its address and tokens; closing its stdin stops it.

const { spawn } = require('child_process');
const readline = require('readline');

// Starts memoryd; resolves { address, token, tokens: { name: jwt }, stop() }.
// args: memoryd_fixture's (--scope=..., --token=NAME=SCOPES).
function startMemoryd(args = []) {
  const bin = process.env.MEMORYD_FIXTURE;
  if (!bin) throw new Error('MEMORYD_FIXTURE is not set (run through bazel test)');
  const proc = spawn(bin, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: proc.stdout });
  const want = 2 + args.filter((a) => a.startsWith('--token=')).length;
  return new Promise((resolve, reject) => {
    const got = { tokens: {} };
    let n = 0;
    proc.on('exit', (code) => reject(new Error(`memoryd_fixture exited ${code} before serving`)));
    lines.on('line', (line) => {
      const [what, value] = line.split(' ');
      if (what === 'address') got.address = value;
      else if (what === 'token') got.token = value;
      else if (what.startsWith('token-')) got.tokens[what.slice(6)] = value;
      if (++n === want) {
        proc.removeAllListeners('exit');
        got.stop = () => new Promise((done) => {
          proc.on('exit', (code) => done(code));
          proc.stdin.end();
        });
        resolve(got);
      }
    });
  });
}

module.exports = { startMemoryd };
