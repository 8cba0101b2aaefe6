// bench/fanout_server.js serves the same records both ways: starts it, reads shard 1 of a
// small stream with GetShardIterator / GetRecords (HTTP/1.1) and with SubscribeToShard (h2c
// on the same port), decodes the event stream (both CRCs checked) and compares the records.
// Exits 0 when they match, 1 naming what differed.
//
//   node bench_server_smoke.js
'use strict';
const {spawn} = require('child_process');
const http = require('http');
const http2 = require('http2');
const path = require('path');
const zlib = require('zlib');

const SERVER = path.join(__dirname, '..', '..', '..', 'bench', 'fanout_server.js');
const ARN = 'arn:aws:kinesis:us-east-1:123456789012:stream/smoke';

function fail(what) {
  process.stderr.write('bench_server_smoke: ' + what + '\n');
  process.exit(1);
}

function call(port, op, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({host: '127.0.0.1', port, method: 'POST', path: '/',
      headers: {'x-amz-target': 'Kinesis_20131202.' + op}}, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve([res.statusCode, JSON.parse(Buffer.concat(chunks).toString())]));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
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
    out.push({headers, payload: buf.toString('utf8', at + 12 + hlen, at + total - 4)});
    at += total;
  }
  return out;
}

// The first two messages SubscribeToShard sends (the initial response and one event).
function subscribe(port) {
  return new Promise((resolve, reject) => {
    const session = http2.connect('http://127.0.0.1:' + port);
    session.on('error', reject);
    const req = session.request({':method': 'POST', ':path': '/',
      'x-amz-target': 'Kinesis_20131202.SubscribeToShard'});
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
    req.end(JSON.stringify({ConsumerARN: ARN + '/consumer/c:1', ShardId: 'shardId-000000000001',
      StartingPosition: {Type: 'TRIM_HORIZON'}}));
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
    const pushed = JSON.parse(messages[1].payload);
    const key = (rs) => JSON.stringify(rs.map((r) => [r.SequenceNumber, r.Data]));
    // Shard 1 of 4 holds records 1, 5 and 9 of the stream's 10.
    if (polled.Records.length !== 3) fail('GetRecords gave ' + polled.Records.length + ' records, not 3');
    if (key(pushed.Records) !== key(polled.Records)) fail('the event and GetRecords differ');
    if (pushed.ContinuationSequenceNumber !== polled.Records[2].SequenceNumber) fail('continuation');
    if (!Buffer.from(polled.Records[0].Data, 'base64').toString().startsWith('smoke 1 ')) fail('record data');
    process.stdout.write('bench_server_smoke: the same 3 records both ways\n');
  } finally {
    clearTimeout(timer);
    server.kill();
  }
}

main().catch((e) => fail(e.stack || String(e)));
