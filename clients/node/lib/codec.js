'use strict';
// Request checking and JSON conversion, driven by the messages' descriptors
// (from @grpc/proto-loader). Two things grpc-js would not do:
//  - a field of the wrong type or an unknown field is an INVALID_ARGUMENT
//    before anything is sent (protobufjs would silently turn 7 into "7", or
//    drop the unknown field);
//  - google.protobuf.Value and Struct fields take and give plain JSON
//    values ({ steps: 3 }), not { structValue: { fields: ... } }.

const { invalidArgument } = require('./errors');

const INT_TYPES = new Set(['TYPE_INT32', 'TYPE_INT64', 'TYPE_UINT32', 'TYPE_UINT64',
  'TYPE_SINT32', 'TYPE_SINT64', 'TYPE_FIXED32', 'TYPE_FIXED64', 'TYPE_SFIXED32',
  'TYPE_SFIXED64']);
const VALUE = 'google.protobuf.Value';
const STRUCT = 'google.protobuf.Struct';

// A JSON value as a google.protobuf.Value object.
function toValue(v, path = 'value') {
  if (v === null || v === undefined) return { nullValue: 'NULL_VALUE' };
  switch (typeof v) {
    case 'number':
      if (!Number.isFinite(v)) throw invalidArgument(`${path}: ${v} is not a JSON number`);
      return { numberValue: v };
    case 'string': return { stringValue: v };
    case 'boolean': return { boolValue: v };
    case 'object':
      if (Array.isArray(v)) return { listValue: { values: v.map((x, i) => toValue(x, `${path}[${i}]`)) } };
      return { structValue: toStruct(v, path) };
    default: throw invalidArgument(`${path}: a ${typeof v} is not a JSON value`);
  }
}

function toStruct(obj, path = 'struct') {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj))
    throw invalidArgument(`${path}: a JSON object expected`);
  const fields = {};
  for (const [k, v] of Object.entries(obj)) fields[k] = toValue(v, `${path}.${k}`);
  return { fields };
}

// A google.protobuf.Value object (as grpc-js decodes it) as a JSON value.
function fromValue(v) {
  if (!v) return null;
  switch (v.kind) {
    case 'numberValue': return v.numberValue;
    case 'stringValue': return v.stringValue;
    case 'boolValue': return v.boolValue;
    case 'structValue': return fromStruct(v.structValue);
    case 'listValue': return (v.listValue?.values || []).map(fromValue);
    default: return null;
  }
}

function fromStruct(s) {
  const out = {};
  for (const [k, v] of Object.entries(s?.fields || {})) out[k] = fromValue(v);
  return out;
}

class Codec {
  // packageDefinition: what protoLoader.loadSync returned.
  constructor(packageDefinition) {
    this.messages = new Map();
    this.enums = new Map();
    for (const [name, def] of Object.entries(packageDefinition)) {
      if (def.format?.endsWith('EnumDescriptorProto')) this.enums.set(name, def.type);
      else if (def.format?.endsWith('DescriptorProto')) this.messages.set(name, def.type);
    }
  }

  // The full name of a field's type, written in the proto relative to the
  // package of the message that holds it (`Entry`, `google.protobuf.Struct`).
  resolve(holder, name) {
    const pkg = holder.slice(0, holder.lastIndexOf('.'));
    const relative = `${pkg}.${name}`;
    return this.messages.has(relative) || this.enums.has(relative) ? relative : name;
  }

  // The request as grpc-js should send it; throws INVALID_ARGUMENT naming
  // the first field that is wrong.
  encode(typeName, obj, path = 'request') {
    if (obj === null || typeof obj !== 'object' || Array.isArray(obj))
      throw invalidArgument(`${path}: an object expected, got ${describe(obj)}`);
    const type = this.messages.get(typeName);
    const out = {};
    for (const [name, v] of Object.entries(obj)) {
      const field = type.field.find((f) => f.name === name);
      if (!field) {
        const known = type.field.map((f) => f.name).join(', ');
        throw invalidArgument(`${path}: no field "${name}" in ${typeName} (fields: ${known})`);
      }
      if (v === undefined || v === null) continue;
      const at = `${path}.${name}`;
      if (field.label === 'LABEL_REPEATED') {
        if (!Array.isArray(v)) throw invalidArgument(`${at}: an array expected, got ${describe(v)}`);
        out[name] = v.map((x, i) => this.encodeField(typeName, field, x, `${at}[${i}]`));
      } else {
        out[name] = this.encodeField(typeName, field, v, at);
      }
    }
    return out;
  }

  encodeField(holder, field, v, at) {
    const t = field.type;
    const fieldType = field.typeName && this.resolve(holder, field.typeName);
    const fail = (want) => invalidArgument(`${at}: ${want} expected, got ${describe(v)}`);
    if (t === 'TYPE_STRING') { if (typeof v !== 'string') throw fail('a string'); return v; }
    if (t === 'TYPE_BOOL') { if (typeof v !== 'boolean') throw fail('a boolean'); return v; }
    if (t === 'TYPE_DOUBLE' || t === 'TYPE_FLOAT') {
      if (typeof v !== 'number') throw fail('a number');
      return v;
    }
    if (INT_TYPES.has(t)) {
      const ok = (typeof v === 'number' && Number.isSafeInteger(v)) ||
        (typeof v === 'string' && /^-?\d+$/.test(v)) || typeof v === 'bigint';
      if (!ok) throw fail('an integer');
      return typeof v === 'bigint' ? v.toString() : v;
    }
    if (t === 'TYPE_BYTES') {
      if (typeof v === 'string') return Buffer.from(v, 'utf8');
      if (!(v instanceof Uint8Array)) throw fail('a Buffer or a string');
      return v;
    }
    if (t === 'TYPE_ENUM') {
      const e = this.enums.get(fieldType);
      const ok = e.value.some((x) => x.name === v || x.number === v);
      if (!ok) throw fail(`one of ${e.value.map((x) => x.name).join(', ')}`);
      return v;
    }
    // A message.
    if (fieldType === VALUE) return toValue(v, at);
    if (fieldType === STRUCT) return toStruct(v, at);
    return this.encode(fieldType, v, at);
  }

  // A response with its Value and Struct fields as plain JSON (in place).
  decode(typeName, obj) {
    const type = this.messages.get(typeName);
    if (!type || !obj) return obj;
    for (const field of type.field) {
      if (field.type !== 'TYPE_MESSAGE' || obj[field.name] == null) continue;
      const fieldType = this.resolve(typeName, field.typeName);
      const one = (x) => {
        if (fieldType === VALUE) return fromValue(x);
        if (fieldType === STRUCT) return fromStruct(x);
        return this.decode(fieldType, x);
      };
      const v = obj[field.name];
      obj[field.name] = Array.isArray(v) ? v.map(one) : one(v);
    }
    return obj;
  }
}

function describe(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + '…' : v)}`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}

module.exports = { Codec, toValue, fromValue, toStruct, fromStruct };
