'use strict';
// memoryd-client: the Node.js client of memoryd (see README.md and index.d.ts).

const { MemorydClient, DEFAULT_TARGET } = require('./lib/client');
const { MemorydError, status } = require('./lib/errors');
const { Memory } = require('./lib/memory');
const { Board, Subscription } = require('./lib/board');
const { toValue, fromValue, toStruct, fromStruct } = require('./lib/codec');
const { duration, toDate } = require('./lib/values');

module.exports = { MemorydClient, MemorydError, Memory, Board, Subscription, status,
  DEFAULT_TARGET, toValue, fromValue, toStruct, fromStruct, duration, toDate };
