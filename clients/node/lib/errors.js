'use strict';
// MemorydError: every failed call, with the gRPC status code and memoryd's
// message as the server sent them (a model or a person can read why).

const { status } = require('@grpc/grpc-js');

const CODE_NAMES = Object.fromEntries(Object.entries(status).map(([name, code]) => [code, name]));

class MemorydError extends Error {
  // code: the numeric gRPC status (grpc.status.NOT_FOUND = 5, ...);
  // details: memoryd's message, unchanged.
  constructor(code, details, metadata) {
    const codeName = CODE_NAMES[code] || `CODE_${code}`;
    super(`${codeName}: ${details}`);
    this.name = 'MemorydError';
    this.code = code;
    this.codeName = codeName;
    this.details = details;
    this.metadata = metadata;
  }

  // A grpc-js ServiceError as a MemorydError; anything else unchanged.
  static from(err) {
    if (err instanceof MemorydError || typeof err?.code !== 'number') return err;
    return new MemorydError(err.code, err.details ?? err.message, err.metadata);
  }
}

// A request the client refuses before sending it (wrong field name or type):
// INVALID_ARGUMENT, as memoryd would answer.
function invalidArgument(message) {
  return new MemorydError(status.INVALID_ARGUMENT, message);
}

module.exports = { MemorydError, invalidArgument, status };
