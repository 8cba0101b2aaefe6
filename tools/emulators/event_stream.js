// The AWS event stream encoding (application/vnd.amazon.eventstream), as SubscribeToShard
// frames its events, for the scripted servers (tests/integration/fanout/fanout_server.js,
// bench/fanout_server.js). See src/eventstream/event_stream.h for the layout.
'use strict';
const zlib = require('zlib');

// One header of string type (7): u8 name length, name, u8 type, u16 value length, value.
function header(name, value) {
  const n = Buffer.from(name, 'utf8');
  const v = Buffer.from(value, 'utf8');
  const b = Buffer.alloc(1 + n.length + 1 + 2 + v.length);
  b.writeUInt8(n.length, 0);
  n.copy(b, 1);
  b.writeUInt8(7, 1 + n.length);
  b.writeUInt16BE(v.length, 2 + n.length);
  v.copy(b, 4 + n.length);
  return b;
}

// One message of string `headers` ({name: value}) and `payload`; with `corrupt`, its message
// CRC is wrong.
function message(headers, payload, corrupt) {
  const hs = Buffer.concat(Object.entries(headers).map(([k, v]) => header(k, v)));
  const p = Buffer.from(payload, 'utf8');
  const total = 12 + hs.length + p.length + 4;
  const m = Buffer.alloc(total);
  m.writeUInt32BE(total, 0);
  m.writeUInt32BE(hs.length, 4);
  m.writeUInt32BE(zlib.crc32(m.subarray(0, 8)), 8);
  hs.copy(m, 12);
  p.copy(m, 12 + hs.length);
  let crc = zlib.crc32(m.subarray(0, total - 4));
  if (corrupt) crc = (crc ^ 0xdeadbeef) >>> 0;
  m.writeUInt32BE(crc, total - 4);
  return m;
}

module.exports = {message};
