'use strict';
// One MCP session: an McpServer with memoryd's tools and resources, bound
// to one memoryd token (a MemorydClient of its own).

const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { MemorydClient } = require('memoryd-client');
const { registerTools } = require('./tools');
const { registerResources } = require('./resources');
const { version } = require('../package.json');

const INSTRUCTIONS = 'memoryd is a memory service. Entries (save_memory, read_memory, ' +
  'search_memories, list_memories, ...) are namespaced key-value memories: a namespace is ' +
  '"agent:workflow:node". Working memory (memory, render_memory) keeps short documents at ' +
  'paths for a graph node or one of its threads, rendered for your prompt within a budget. ' +
  'A session (session) is a scratchpad that expires when no longer used. ' +
  'The knowledge graph (put_entity, relate, traverse, ...) holds ' +
  'entities and their relationships. Blackboards (blackboard_post, blackboard_read) are ' +
  'shared by the agents of a task. What you may read and write is decided by the token this ' +
  'server was given, never by tool arguments.';

// options: target, token, timeoutMs, tls (MemorydClient's: null =
// plaintext). Returns { mcp, client, close() }.
function createSession({ target, token, timeoutMs, tls }) {
  const client = new MemorydClient({ target, token, timeoutMs, tls: tls || undefined });
  const mcp = new McpServer({ name: 'memoryd-mcp', version },
    { instructions: INSTRUCTIONS, capabilities: { tools: {}, resources: {} } });
  registerTools(mcp, () => client);
  const endSubscriptions = registerResources(mcp, () => client);
  let closed = false;
  return {
    mcp,
    client,
    async close() {
      if (closed) return;
      closed = true;
      endSubscriptions();
      await mcp.close().catch(() => {});
      client.close();
    },
  };
}

module.exports = { createSession };
