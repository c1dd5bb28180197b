#!/usr/bin/env node
'use strict';
// A small Node.js agent of memoryd: remembers a user's preference in its
// namespaced memory, claims a sub-task on its task's blackboard and posts
// the result, then lists what it remembers.
//
//   MEMORYD_TOKEN=$(cat .local/dev-token) node clients/node/example.js [ADDRESS]
//
// ADDRESS defaults to $MEMORYD_TARGET or 127.0.0.1:50051. MEMORYD_TOKEN
// needs entries:read/write and blackboard:read/write (make run's dev token
// has them); without one the example shows memoryd's UNAUTHENTICATED.
// Exits 1 when memoryd cannot be reached or a call fails, 0 otherwise.

const { MemorydClient, MemorydError, status } = require('./index');

async function main() {
  const target = process.argv[2] || process.env.MEMORYD_TARGET || '127.0.0.1:50051';
  const client = new MemorydClient({ target, token: process.env.MEMORYD_TOKEN, timeoutMs: 5000 });
  try {
    console.log('health:', await client.checkHealth());

    // Key-value memory of this agent's node: reads never write.
    const memory = client.memory('example:node-agent:prefs');
    if ((await memory.get('user_style')) === undefined) {
      await memory.write('user_style', 'terse, with examples', { tags: ['preference'] });
    }
    await memory.write('user_langs', ['C', 'Go', 'TypeScript']);
    console.log('user_style:', await memory.get('user_style'));
    console.log('user_langs:', (await memory.get('user_langs')).join(', '));
    const keys = await memory.listKeys('user_*');
    console.log('keys:', keys.map((k) => `${k.namespace}/${k.key}`).join(' '));

    // Coordination on the task's blackboard: claim, work, post, release.
    const board = client.board('example-task');
    if (await board.claim('subtask/summary', 'node-agent', { leaseSeconds: 30 })) {
      await board.post('result/summary', { by: 'node-agent', words: 42 });
      await board.delete('subtask/summary');
      console.log('board: claimed subtask/summary and posted result/summary');
    } else {
      console.log('board: subtask/summary is claimed by another agent');
    }
    const runs = await board.update('runs', (n) => (n || 0) + 1);
    console.log('board: runs =', runs);
    return 0;
  } catch (err) {
    if (err instanceof MemorydError) {
      console.error(`memoryd at ${target}: ${err.codeName}: ${err.details}`);
      if (err.code === status.UNAVAILABLE) console.error('(is memoryd running? make run)');
      return 1;
    }
    throw err;
  } finally {
    client.close();
  }
}

main().then((code) => process.exit(code));
