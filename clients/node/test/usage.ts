// Compiled (never run) by types.test.js: the declarations in index.d.ts
// accept what the README and example show and refuse what they should.
import { MemorydClient, MemorydError, Json } from '..';

async function agent(): Promise<number> {
  const client = new MemorydClient({ target: '127.0.0.1:50051', token: 'jwt', timeoutMs: 5000 });
  const memory = client.memory('planner:trip:prefs');
  await memory.write('user_style', 'terse', { tags: ['preference'], ttlSeconds: 3600 });
  const style: Json | Buffer | undefined = await memory.get('user_style');
  const keys = await memory.listKeys('user_*', { namespace: 'planner:*:*' });
  const first: string = keys[0].namespace + keys[0].key;
  const board = client.board('task-42');
  const n: number = await board.update('count', (v) => (typeof v === 'number' ? v : 0) + 1);
  for await (const ev of board.subscribe({ afterVersion: 3, boardId: 'b' })) {
    if (ev.kind === 'BLACKBOARD_EVENT_KIND_PUT') console.log(ev.items[0].value);
  }
  const raw = await client.entries.Read({ namespace: 'a:b:c', key: 'k' }, { timeoutMs: 100 });
  for await (const rec of client.audit.Watch({})) console.log(rec.record);
  try {
    await memory.get('k');
  } catch (err) {
    if (err instanceof MemorydError) return err.code;
  }
  // @ts-expect-error a key is a string
  await memory.get(7);
  // @ts-expect-error claim needs its options (the lease)
  await board.claim('subtask/1', 'me');
  void style; void first; void n; void raw;
  return 0;
}
void agent;
