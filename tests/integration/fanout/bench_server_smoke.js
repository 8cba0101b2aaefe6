// bench/fanout_server.js serves the same records both ways: starts it, reads shard 1 of a
// small stream with GetShardIterator / GetRecords (HTTP/1.1) and with SubscribeToShard (h2c
// on the same port), decodes the event stream (both CRCs checked) and compares the records;
// then the same in CBOR (Content-Type application/x-amz-cbor-1.1): record data as byte
// strings, arrival times as tag 1, errors as CBOR maps. Exits 0 when they match, 1 naming
// what differed.
//
//   node bench_server_smoke.js
'use strict';
const {spawn} = require('child_process');
const http = require('http');
const http2 = require('http2');
const path = require('path');
const zlib = require('zlib');
const cbor = require(path.join(__dirname, '..', '..', '..', 'tools', 'emulators', 'cbor.js'));
const CBOR = 'application/x-amz-cbor-1.1';

const SERVER = path.join(__dirname, '..', '..', '..', 'bench', 'fanout_server.js');
const ARN = 'arn:aws:kinesis:us-east-1:123456789012:stream/smoke';

function fail(what) {
  process.stderr.write('bench_server_smoke: ' + what + '\n');
  process.exit(1);
}

// One call: [status, answer]; with `inCbor` the request and the answer are CBOR (the raw
// answer bytes come third).
function call(port, op, body, inCbor) {
  return new Promise((resolve, reject) => {
    const headers = {'x-amz-target': 'Kinesis_20131202.' + op};
    if (inCbor) headers['content-type'] = CBOR;
    const req = http.request({host: '127.0.0.1', port, method: 'POST', path: '/', headers}, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const raw = Buffer.concat(chunks);
        if (inCbor && res.headers['content-type'] !== CBOR) fail(op + ' answered ' + res.headers['content-type']);
        resolve([res.statusCode, inCbor ? cbor.decode(raw) : JSON.parse(raw.toString()), raw]);
      });
    });
    req.on('error', reject);
    req.end(inCbor ? cbor.encode(body) : JSON.stringify(body));
  });
}

// The messages of an event stream: [{headers, payload}], checking both CRCs.
function decode(buf) {
  const out = [];
  for (let at = 0; at < buf.length;) {
    const total = buf.readUInt32BE(at);
    const hlen = buf.readUInt32BE(at + 4);
    if (zlib.crc32(buf.subarray(at, at + 8)) !== buf.readUInt32BE(at + 8)) fail('prelude CRC');
    if (zlib.crc32(buf.subarray(at, at + total - 4)) !== buf.readUInt32BE(at + total - 4)) fail('message CRC');
    const headers = {};
    for (let h = at + 12; h < at + 12 + hlen;) {
      const name = buf.toString('utf8', h + 1, h + 1 + buf[h]);
      h += 1 + buf[h] + 1;
      const len = buf.readUInt16BE(h);
      headers[name] = buf.toString('utf8', h + 2, h + 2 + len);
      h += 2 + len;
    }
    out.push({headers, payload: buf.subarray(at + 12 + hlen, at + total - 4)});
    at += total;
  }
  return out;
}

// The first two messages SubscribeToShard sends (the initial response and one event).
function subscribe(port, inCbor) {
  return new Promise((resolve, reject) => {
    const session = http2.connect('http://127.0.0.1:' + port);
    session.on('error', reject);
    const headers = {':method': 'POST', ':path': '/', 'x-amz-target': 'Kinesis_20131202.SubscribeToShard'};
    if (inCbor) headers['content-type'] = CBOR;
    const req = session.request(headers);
    const chunks = [];
    req.on('response', (h) => { if (h[':status'] !== 200) reject(new Error('status ' + h[':status'])); });
    req.on('data', (c) => {
      chunks.push(c);
      const messages = (() => { try { return decode(Buffer.concat(chunks)); } catch (e) { return []; } })();
      if (messages.length >= 2) {
        session.destroy();
        resolve(messages);
      }
    });
    const body = {ConsumerARN: ARN + '/consumer/c:1', ShardId: 'shardId-000000000001',
      StartingPosition: {Type: 'TRIM_HORIZON'}};
    req.end(inCbor ? cbor.encode(body) : JSON.stringify(body));
  });
}

async function main() {
  const server = spawn('node', [SERVER, '--stream', 'smoke=10', '--record-bytes', '64'],
    {stdio: ['ignore', 'pipe', 'inherit']});
  const timer = setTimeout(() => fail('no answer within 30 s'), 30000);
  try {
    const port = await new Promise((resolve) => server.stdout.once('data', (d) => resolve(JSON.parse(d).port)));
    const [st, it] = await call(port, 'GetShardIterator', {StreamName: 'smoke', ShardId: 'shardId-000000000001',
      ShardIteratorType: 'TRIM_HORIZON'});
    if (st !== 200) fail('GetShardIterator answered ' + st);
    const [, polled] = await call(port, 'GetRecords', {ShardIterator: it.ShardIterator});
    const messages = await subscribe(port);
    if (messages[0].headers[':event-type'] !== 'initial-response') fail('no initial-response first');
    if (messages[1].headers[':event-type'] !== 'SubscribeToShardEvent') fail('no SubscribeToShardEvent');
    const pushed = JSON.parse(messages[1].payload.toString());
    const key = (rs) => JSON.stringify(rs.map((r) => [r.SequenceNumber, r.Data]));
    // Shard 1 of 4 holds records 1, 5 and 9 of the stream's 10.
    if (polled.Records.length !== 3) fail('GetRecords gave ' + polled.Records.length + ' records, not 3');
    if (key(pushed.Records) !== key(polled.Records)) fail('the event and GetRecords differ');
    if (pushed.ContinuationSequenceNumber !== polled.Records[2].SequenceNumber) fail('continuation');
    if (!Buffer.from(polled.Records[0].Data, 'base64').toString().startsWith('smoke 1 ')) fail('record data');
    await checkCbor(port, polled);
    process.stdout.write('bench_server_smoke: the same 3 records both ways, in JSON and in CBOR\n');
  } finally {
    clearTimeout(timer);
    server.kill();
  }
}

// The same records in CBOR, polled and pushed, against `polled` (the JSON answer).
async function checkCbor(port, polled) {
  // The head of record data: a byte string (major type 2), not base64 text.
  const [st, it] = await call(port, 'GetShardIterator', {StreamName: 'smoke',
    ShardId: 'shardId-000000000001', ShardIteratorType: 'AT_TIMESTAMP',
    Timestamp: new cbor.Tagged(1, Date.now() - 3600000)}, true);
  if (st !== 200) fail('CBOR GetShardIterator answered ' + st);
  const [, got, raw] = await call(port, 'GetRecords', {ShardIterator: it.ShardIterator, Limit: 10}, true);
  if (!Buffer.isBuffer(got.Records[0].Data)) fail('CBOR record Data is not a byte string');
  const want = polled.Records.map((r) => r.SequenceNumber + ' ' + r.Data);
  const key = (rs) => JSON.stringify(rs.map((r) => r.SequenceNumber + ' ' + r.Data.toString('base64')));
  if (key(got.Records) !== JSON.stringify(want)) fail('CBOR GetRecords differs from JSON');
  // ApproximateArrivalTimestamp: tag 1 (0xc1), then integer milliseconds.
  const at = raw.indexOf('ApproximateArrivalTimestamp') + 'ApproximateArrivalTimestamp'.length;
  if (raw[at] !== 0xc1) fail('the arrival time is not tagged 1');
  const ms = Math.round(polled.Records[0].ApproximateArrivalTimestamp * 1000);
  if (got.Records[0].ApproximateArrivalTimestamp !== ms) fail('the arrival time in ms differs');
  const messages = await subscribe(port, true);
  if (messages[1].headers[':content-type'] !== CBOR) fail('the event is not CBOR');
  const pushed = cbor.decode(messages[1].payload);
  if (key(pushed.Records) !== JSON.stringify(want)) fail('the CBOR event differs from JSON');
  const [est, err] = await call(port, 'GetShardIterator', {StreamName: 'no-such-stream',
    ShardId: 'shardId-000000000000', ShardIteratorType: 'TRIM_HORIZON'}, true);
  if (est !== 400 || err.__type !== 'ResourceNotFoundException' || typeof err.message !== 'string') {
    fail('CBOR error: ' + est + ' ' + JSON.stringify(err));
  }
}

main().catch((e) => fail(e.stack || String(e)));
