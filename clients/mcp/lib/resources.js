'use strict';
// The MCP resources of memoryd-mcp: a namespace's entries
// (memoryd://entries/{namespace}) and a task's blackboard
// (memoryd://board/{task_id}), read through the session's MemorydClient.
// A board can be subscribed to: a Blackboard.Subscribe stream then sends
// notifications/resources/updated on every change (at most
// MAX_SUBSCRIPTIONS per session; each ends with the session).

const { ResourceTemplate } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { SubscribeRequestSchema, UnsubscribeRequestSchema, McpError, ErrorCode } =
  require('@modelcontextprotocol/sdk/types.js');
const { MemorydError } = require('memoryd-client');
const { entryView, boardView } = require('./tools');

const MAX_SUBSCRIPTIONS = 32;
const ENTRIES_LIMIT = 100; // entries in one read of a namespace resource
const BOARD_URI = /^memoryd:\/\/board\/(.+)$/;

const asJson = (uri, obj) => ({ contents: [{ uri: uri.href ?? uri, mimeType: 'application/json',
  text: JSON.stringify(obj, null, 1) }] });

// memoryd's refusal as a JSON-RPC error of resources/read (a resource read
// has no isError result).
function readError(err) {
  if (!(err instanceof MemorydError)) throw err;
  throw new McpError(ErrorCode.InvalidParams, `memoryd refused: ${err.codeName}: ${err.details}`);
}

// Registers the resources and the board subscriptions on an McpServer
// (before it connects); clientOf() is the session's MemorydClient. Returns
// close(), which ends the session's subscriptions.
function registerResources(mcp, clientOf) {
  mcp.registerResource('entries', new ResourceTemplate('memoryd://entries/{namespace}',
    { list: undefined }), {
    description: `The memory entries of a namespace (e.g. memoryd://entries/planner:trip:prefs), ` +
      `with their values; the first ${ENTRIES_LIMIT}.`,
    mimeType: 'application/json',
  }, async (uri, { namespace }) => {
    try {
      const r = await clientOf().entries.List({ namespacePattern: decodeURIComponent(namespace),
        withValues: true, pageSize: ENTRIES_LIMIT });
      return asJson(uri, { entries: r.entries.map((e) => entryView(e)),
        truncated: Boolean(r.nextPageToken) });
    } catch (err) {
      return readError(err);
    }
  });
  mcp.registerResource('board', new ResourceTemplate('memoryd://board/{task_id}',
    { list: undefined }), {
    description: 'The shared blackboard of a task (e.g. memoryd://board/task-42); subscribe ' +
      'to be told of every change.',
    mimeType: 'application/json',
  }, async (uri, { task_id: task }) => {
    try {
      return asJson(uri, boardView(await clientOf().blackboard.Read(
        { taskId: decodeURIComponent(task) })));
    } catch (err) {
      return readError(err);
    }
  });

  const subs = new Map(); // uri -> Subscription
  mcp.server.registerCapabilities({ resources: { subscribe: true } });
  mcp.server.setRequestHandler(SubscribeRequestSchema, async ({ params: { uri } }) => {
    const m = BOARD_URI.exec(uri);
    if (!m) throw new McpError(ErrorCode.InvalidParams,
      `only board resources (memoryd://board/{task_id}) can be subscribed to, not ${uri}`);
    if (subs.has(uri)) return {};
    if (subs.size >= MAX_SUBSCRIPTIONS) throw new McpError(ErrorCode.InvalidRequest,
      `at most ${MAX_SUBSCRIPTIONS} subscriptions per session`);
    const sub = clientOf().board(decodeURIComponent(m[1])).subscribe();
    subs.set(uri, sub);
    const it = sub[Symbol.asyncIterator]();
    // The first event (the SNAPSHOT) proves the caller may read the board:
    // a refusal fails the subscribe request itself.
    try {
      await it.next();
    } catch (err) {
      subs.delete(uri);
      return readError(err);
    }
    (async () => {
      try {
        for (let r = await it.next(); !r.done; r = await it.next()) {
          await mcp.server.sendResourceUpdated({ uri });
        }
      } catch {
        // The stream failed for good (token revoked or expired, ...): the
        // client sees no more updates and may subscribe again.
      } finally {
        if (subs.get(uri) === sub) subs.delete(uri);
      }
    })();
    return {};
  });
  mcp.server.setRequestHandler(UnsubscribeRequestSchema, async ({ params: { uri } }) => {
    subs.get(uri)?.cancel();
    subs.delete(uri);
    return {};
  });
  return () => {
    for (const sub of subs.values()) sub.cancel();
    subs.clear();
  };
}

module.exports = { registerResources, MAX_SUBSCRIPTIONS };
