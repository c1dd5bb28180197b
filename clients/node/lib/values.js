'use strict';
// Small conversions for request fields.

const { invalidArgument } = require('./errors');

// Seconds (may be fractional) as a google.protobuf.Duration.
function duration(seconds) {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0)
    throw invalidArgument(`a duration in seconds expected, got ${seconds}`);
  const whole = Math.floor(seconds);
  return { seconds: whole, nanos: Math.round((seconds - whole) * 1e9) };
}

// A google.protobuf.Timestamp as a Date (null stays null).
function toDate(ts) {
  return ts ? new Date(Number(ts.seconds) * 1000 + Math.floor((ts.nanos || 0) / 1e6)) : null;
}

module.exports = { duration, toDate };
