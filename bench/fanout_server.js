#!/usr/bin/env node
// A scripted Kinesis endpoint for benchmarks: the same records served to a polling consumer
// (GetShardIterator / GetRecords) and to a fan-out consumer (SubscribeToShard), shaped as AWS
// serves them, on one plain-HTTP port of 127.0.0.1 written on Node's http and http2 modules.
//
//   node fanout_server.js --stream NAME=COUNT [--stream NAME=COUNT ...] [--shards 4]
//                         [--record-bytes 1000] [--event-bytes 1048576]
//                         [--shard-bytes-per-s 2097152] [--lifetime-s 300] [--port 0]
//
// Each stream holds COUNT records spread evenly over --shards shards (record i of a stream
// goes to shard i % shards), each of --record-bytes bytes ("<stream> <i> xxx..."), made from
// their index, so every run serves the same bytes. Nothing can be put; the streams are full
// from the start.
//   SubscribeToShard: an initial-response event, then SubscribeToShardEvents of as many
//     records as fit in --event-bytes of record data, at most --shard-bytes-per-s per shard
//     (AWS: 2 MB/s), each with its ContinuationSequenceNumber and MillisBehindLatest; once
//     the shard has nothing more, an empty event every second. After --lifetime-s (AWS: 5
//     minutes) the stream ends normally. HTTP/2 flow control is honoured (a paused reader
//     pauses the server).
//   GetRecords: up to Limit (at most 10,000) records or 10 MB of record data per call, held
//     back as long as needed to keep the shard under --shard-bytes-per-s as well.
//   Around them: ListShards, DescribeStreamSummary, DescribeStream, RegisterStreamConsumer,
//     DescribeStreamConsumer, ListStreamConsumers, DeregisterStreamConsumer.
// HTTP/1.1 requests (the JSON operations) and h2c with prior knowledge (SubscribeToShard, as
// kcl-cpp opens it on http:// endpoints) share the port: the first bytes of a connection say
// which. Prints {"port": P} once listening; one line per unknown operation to stderr.
//
// Both wires, as AWS serves them: a request with Content-Type application/x-amz-cbor-1.1 (read
// as CBOR) is answered in CBOR with the same content type (tools/emulators/cbor.js): record
// Data as byte strings (major type 2), timestamps as tag 1 and epoch milliseconds (what the
// cbor-1.1 protocol sends; kinesis/kinesis_cbor.h), errors as maps of __type and message. A
// SubscribeToShard asked in CBOR gets its events' payloads in CBOR (:content-type
// application/x-amz-cbor-1.1 on each event). Anything else is JSON (application/x-amz-json-1.1).
'use strict';
const http = require('http');
const http2 = require('http2');
const net = require('net');
const path = require('path');
const {message} = require(path.join(__dirname, '../tools/emulators/event_stream.js'));
const cbor = require(path.join(__dirname, '../tools/emulators/cbor.js'));

const MAX_RECORDS_PER_CALL = 10000;
const MAX_BYTES_PER_CALL = 10 * 1024 * 1024;
const ACCOUNT = '123456789012';

function parseArgs(argv) {
  const o = {streams: new Map(), shards: 4, recordBytes: 1000, eventBytes: 1024 * 1024,
    shardBytesPerS: 2 * 1024 * 1024, lifetimeS: 300, port: 0};
  const num = (name, v) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) fail('bad ' + name + ': ' + v);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[++i];
    if (a === '--stream') {
      const m = /^([A-Za-z0-9_.-]+)=(\d+)$/.exec(v || '');
      if (!m) fail('--stream takes NAME=COUNT, not ' + v);
      o.streams.set(m[1], Number(m[2]));
    } else if (a === '--shards') o.shards = num(a, v);
    else if (a === '--record-bytes') o.recordBytes = num(a, v);
    else if (a === '--event-bytes') o.eventBytes = num(a, v);
    else if (a === '--shard-bytes-per-s') o.shardBytesPerS = num(a, v);
    else if (a === '--lifetime-s') o.lifetimeS = num(a, v);
    else if (a === '--port') o.port = Number(v);
    else fail('unknown argument: ' + a);
  }
  if (o.streams.size === 0) fail('no --stream');
  return o;
}

function fail(msg) {
  process.stderr.write('fanout_server.js: ' + msg + '\n');
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));
const created = Math.floor(Date.now() / 1000) - 3600;
const streamArn = (name) => 'arn:aws:kinesis:us-east-1:' + ACCOUNT + ':stream/' + name;
const shardId = (s) => 'shardId-' + String(s).padStart(12, '0');

// Sequence number of the n-th record of shard s: 56 digits, increasing with n.
function seq(s, n) {
  return '4959033827149025660855969253836157109592157' + String(s).padStart(4, '0') +
    String(n).padStart(9, '0');
}
// The index in its shard of the record a sequence number names (-1 when not ours).
function seqIndex(sq) {
  return typeof sq === 'string' && sq.length === 56 ? Number(sq.slice(47)) : -1;
}

// Shard s of `stream`: its records' count.
function shardCount(stream, s) {
  const total = opts.streams.get(stream);
  return Math.floor(total / opts.shards) + (s < total % opts.shards ? 1 : 0);
}

// The data of record n of shard s (record n * shards + s of the stream).
function recordData(stream, s, n) {
  const i = n * opts.shards + s;
  const head = stream + ' ' + i + ' ';
  const data = Buffer.alloc(opts.recordBytes, 'x');
  data.write(head.slice(0, opts.recordBytes));
  return data;
}

// The JSON of record n of shard s.
function recordJson(stream, s, n) {
  return '{"Data":"' + recordData(stream, s, n).toString('base64') + '","PartitionKey":"pk-' +
    (n * opts.shards + s) + '","SequenceNumber":"' + seq(s, n) +
    '","ApproximateArrivalTimestamp":' + (created + n / 1000).toFixed(3) + '}';
}

// Record n of shard s in CBOR, appended to `enc` (a cbor.Encoder): Data as a byte string,
// the arrival time as tag 1 and epoch milliseconds.
function recordCbor(enc, stream, s, n) {
  enc.head(5, 4);
  enc.text('Data');
  enc.bytes(recordData(stream, s, n));
  enc.text('PartitionKey');
  enc.text('pk-' + (n * opts.shards + s));
  enc.text('SequenceNumber');
  enc.text(seq(s, n));
  enc.text('ApproximateArrivalTimestamp');
  enc.head(6, 1);
  enc.number(created * 1000 + n);
}

// Records [from, next) of shard s of `stream` within the byte budget (at least one when any is
// left): {json: the JSON list, next, bytes}, or with `enc` the CBOR array written to enc
// instead of json.
function recordsFrom(stream, s, from, maxRecords, maxBytes, enc) {
  const count = Math.max(0, Math.min(shardCount(stream, s) - from, maxRecords,
    Math.max(1, Math.floor(maxBytes / opts.recordBytes))));
  const next = from + count;
  const bytes = count * opts.recordBytes;
  if (enc) {
    enc.head(4, count);
    for (let n = from; n < next; ++n) recordCbor(enc, stream, s, n);
    return {next, bytes};
  }
  const parts = [];
  for (let n = from; n < next; ++n) parts.push(recordJson(stream, s, n));
  return {json: '[' + parts.join(',') + ']', next, bytes};
}

// A reader's budget of --shard-bytes-per-s: one per subscription, one per chain of shard
// iterators (from its GetShardIterator on), so one benchmark run never pays for the reads of
// the run before it. When `bytes` more may be read, in ms from now (and takes them).
const buckets = new Map();
let nextReader = 0;
function throttle(bucket, bytes) {
  const now = Date.now();
  const at = Math.max(now, bucket.free);
  bucket.free = at + (bytes * 1000) / opts.shardBytesPerS;
  return at - now;
}
function chainBucket(reader) {
  if (!buckets.has(reader)) buckets.set(reader, {free: 0});
  return buckets.get(reader);
}

// --- JSON operations (HTTP/1.1) ---

function shardIndexOf(id) {
  const m = /^shardId-(\d{12})$/.exec(id || '');
  const s = m ? Number(m[1]) : -1;
  return s >= 0 && s < opts.shards ? s : -1;
}

// Where a StartingPosition / GetShardIterator request starts in shard s.
function startIndex(stream, s, type, sequence) {
  switch (type) {
    case 'TRIM_HORIZON':
    case 'AT_TIMESTAMP': return 0;
    case 'LATEST': return shardCount(stream, s);
    case 'AT_SEQUENCE_NUMBER': return Math.max(0, seqIndex(sequence));
    case 'AFTER_SEQUENCE_NUMBER': return seqIndex(sequence) + 1;
    default: return -1;
  }
}

const iterator = (stream, s, n, reader) =>
  Buffer.from(JSON.stringify([stream, s, n, reader])).toString('base64');
function readIterator(it) {
  try {
    const [stream, s, n, reader] = JSON.parse(Buffer.from(it, 'base64').toString());
    return opts.streams.has(stream) ? {stream, s, n, reader} : null;
  } catch (e) {
    return null;
  }
}

function streamOf(body) {
  const name = body.StreamName || (/:stream\/([^/]+)/.exec(body.StreamARN || '') || [])[1];
  return opts.streams.has(name) ? name : null;
}

function shardsOf(stream) {
  const out = [];
  const step = (1n << 128n) / BigInt(opts.shards);
  for (let s = 0; s < opts.shards; ++s) {
    const lo = step * BigInt(s);
    const hi = s === opts.shards - 1 ? (1n << 128n) - 1n : lo + step - 1n;
    out.push({ShardId: shardId(s), HashKeyRange: {StartingHashKey: lo.toString(),
      EndingHashKey: hi.toString()}, SequenceNumberRange: {StartingSequenceNumber: seq(s, 0)}});
  }
  return out;
}

function consumer(stream, name) {
  return {ConsumerName: name, ConsumerARN: streamArn(stream) + '/consumer/' + name + ':' + created,
    ConsumerStatus: 'ACTIVE', ConsumerCreationTimestamp: created, StreamARN: streamArn(stream)};
}

function summary(stream) {
  return {StreamName: stream, StreamARN: streamArn(stream), StreamStatus: 'ACTIVE',
    StreamModeDetails: {StreamMode: 'PROVISIONED'}, RetentionPeriodHours: 24,
    StreamCreationTimestamp: created, EnhancedMonitoring: [{ShardLevelMetrics: []}],
    EncryptionType: 'NONE', OpenShardCount: opts.shards, ConsumerCount: 1};
}

const consumers = new Map();  // stream -> Set of consumer names

// Answers one JSON operation: [status, body object] or a promise of it.
function answer(op, body) {
  const notFound = [400, {__type: 'ResourceNotFoundException', message: 'no such stream'}];
  if (op === 'GetRecords') return getRecords(body, 'json');
  const stream = streamOf(body);
  if (!stream) return notFound;
  const names = consumers.get(stream) || new Set();
  consumers.set(stream, names);
  switch (op) {
    case 'ListShards': return [200, {Shards: shardsOf(stream)}];
    case 'DescribeStreamSummary': return [200, {StreamDescriptionSummary: summary(stream)}];
    case 'DescribeStream':
      return [200, {StreamDescription: Object.assign(summary(stream),
        {Shards: shardsOf(stream), HasMoreShards: false})}];
    case 'RegisterStreamConsumer':
      names.add(body.ConsumerName);
      return [200, {Consumer: consumer(stream, body.ConsumerName)}];
    case 'DescribeStreamConsumer': {
      const name = body.ConsumerName || (/\/consumer\/([^:]+):/.exec(body.ConsumerARN || '') || [])[1];
      if (!names.has(name)) return [400, {__type: 'ResourceNotFoundException', message: 'no consumer'}];
      return [200, {ConsumerDescription: consumer(stream, name)}];
    }
    case 'ListStreamConsumers':
      return [200, {Consumers: [...names].map((n) => consumer(stream, n))}];
    case 'DeregisterStreamConsumer':
      names.delete(body.ConsumerName);
      return [200, {}];
    case 'GetShardIterator': {
      const s = shardIndexOf(body.ShardId);
      const n = s < 0 ? -1 : startIndex(stream, s, body.ShardIteratorType, body.StartingSequenceNumber);
      if (n < 0) return [400, {__type: 'InvalidArgumentException', message: 'bad shard or position'}];
      return [200, {ShardIterator: iterator(stream, s, n, nextReader++)}];
    }
    default:
      process.stderr.write('fanout_server.js: unknown operation ' + op + '\n');
      return [400, {__type: 'UnknownOperationException', message: op}];
  }
}

// GetRecords: the answer ready to send (a JSON string, or with `wire` 'cbor' a CBOR Buffer).
async function getRecords(body, wire) {
  const it = readIterator(body.ShardIterator || '');
  if (!it) return [400, {__type: 'InvalidArgumentException', message: 'bad ShardIterator'}];
  const limit = Math.min(MAX_RECORDS_PER_CALL, body.Limit || MAX_RECORDS_PER_CALL);
  const enc = wire === 'cbor' ? new cbor.Encoder(64 * 1024) : null;
  if (enc) {
    enc.head(5, 3);
    enc.text('Records');
  }
  const r = recordsFrom(it.stream, it.s, it.n, limit, MAX_BYTES_PER_CALL, enc);
  const wait = throttle(chainBucket(it.reader), r.bytes);
  if (wait > 0) await new Promise((done) => setTimeout(done, wait));
  const behind = Math.round((shardCount(it.stream, it.s) - r.next) * 1000 / opts.shards);
  const next = iterator(it.stream, it.s, r.next, it.reader);
  if (enc) {
    enc.text('NextShardIterator');
    enc.text(next);
    enc.text('MillisBehindLatest');
    enc.number(behind);
    return [200, enc.result()];
  }
  return [200, '{"Records":' + r.json + ',"NextShardIterator":"' + next +
    '","MillisBehindLatest":' + behind + '}'];
}

const CBOR_TYPE = 'application/x-amz-cbor-1.1';
const JSON_TYPE = 'application/x-amz-json-1.1';
// The wire a request's Content-Type asks for.
const wireOf = (headers) =>
  String(headers['content-type'] || '').toLowerCase().startsWith(CBOR_TYPE) ? 'cbor' : 'json';

// A request body in its wire: [body object] or [null, error answer].
function readBody(bytes, wire) {
  try {
    const body = wire === 'cbor' ? (bytes.length ? cbor.decode(bytes) : {})
      : JSON.parse(bytes.toString() || '{}');
    if (body !== null && typeof body === 'object' && !Array.isArray(body)) return [body];
    return [null, [400, {__type: 'SerializationException', message: 'the body is not a map'}]];
  } catch (e) {
    return [null, [400, {__type: 'SerializationException', message: String(e.message || e)}]];
  }
}

// An answer object in CBOR: timestamps (members named *Timestamp, kept here in epoch seconds)
// as tag 1 and epoch milliseconds.
function toCbor(v) {
  if (Array.isArray(v)) return v.map(toCbor);
  if (v === null || typeof v !== 'object' || v instanceof Uint8Array) return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    out[k] = k.endsWith('Timestamp') && typeof x === 'number' ? cbor.epochMillis(x * 1000) : toCbor(x);
  }
  return out;
}

// The bytes of an answer (a ready string or Buffer, or an object) in `wire`.
const encodeAnswer = (out, wire) =>
  typeof out === 'string' || out instanceof Uint8Array ? out
    : wire === 'cbor' ? cbor.encode(toCbor(out)) : JSON.stringify(out);

const http1 = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const op = String(req.headers['x-amz-target'] || '').split('.')[1] || '';
    const wire = wireOf(req.headers);
    const [body, refused] = readBody(Buffer.concat(chunks), wire);
    const [status, out] = refused || await (op === 'GetRecords' ? getRecords(body, wire) : answer(op, body));
    const bytes = encodeAnswer(out, wire);
    res.writeHead(status, {'content-type': wire === 'cbor' ? CBOR_TYPE : JSON_TYPE,
      'content-length': Buffer.byteLength(bytes)});
    res.end(bytes);
  });
});
http1.keepAliveTimeout = 60000;

// --- SubscribeToShard (HTTP/2) ---

// A SubscribeToShardEvent of `payload` (JSON text, or a CBOR Buffer with `wire` 'cbor').
const event = (payload, wire) => message({':message-type': 'event',
  ':event-type': 'SubscribeToShardEvent',
  ':content-type': wire === 'cbor' ? CBOR_TYPE : 'application/json'}, payload);

// Writes `m`, waiting for the client to read when HTTP/2 flow control says so.
async function write(stream, m) {
  if (stream.write(m)) return;
  await new Promise((r) => {
    const done = () => {
      stream.off('drain', done);
      stream.off('close', done);
      r();
    };
    stream.on('drain', done);
    stream.on('close', done);
  });
}

async function pushEvents(stream, name, s, from, wire) {
  const until = Date.now() + opts.lifetimeS * 1000;
  let n = from;
  const bucket = {free: 0};
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  stream.respond({':status': 200, 'content-type': 'application/vnd.amazon.eventstream'});
  await write(stream, message({':message-type': 'event', ':event-type': 'initial-response'},
    wire === 'cbor' ? cbor.encode({}) : '{}'));
  while (!stream.destroyed && !stream.closed && Date.now() < until) {
    const enc = wire === 'cbor' ? new cbor.Encoder(opts.eventBytes + 64 * 1024) : null;
    if (enc) {
      enc.head(5, 3);
      enc.text('Records');
    }
    const r = recordsFrom(name, s, n, Number.MAX_SAFE_INTEGER, opts.eventBytes, enc);
    const last = r.next > 0 ? seq(s, r.next - 1) : seq(s, 0);
    const behind = Math.round((shardCount(name, s) - r.next) * 1000 / opts.shards);
    if (r.bytes === 0) await sleep(1000);
    else await sleep(throttle(bucket, r.bytes));
    if (stream.destroyed || stream.closed) return;
    if (enc) {
      enc.text('ContinuationSequenceNumber');
      enc.text(last);
      enc.text('MillisBehindLatest');
      enc.number(behind);
      await write(stream, event(enc.result(), wire));
    } else {
      await write(stream, event('{"Records":' + r.json + ',"ContinuationSequenceNumber":"' + last +
        '","MillisBehindLatest":' + behind + '}', wire));
    }
    n = r.next;
  }
  if (!stream.destroyed && !stream.closed) stream.end();
}

// An error answer on an HTTP/2 stream, in `wire`.
function refuse(stream, wire, status, error) {
  stream.respond({':status': status, 'content-type': wire === 'cbor' ? CBOR_TYPE : JSON_TYPE});
  stream.end(encodeAnswer(error, wire));
}

function subscribe(stream, body, wire) {
  const name = streamOf({StreamARN: body.ConsumerARN});
  const s = shardIndexOf(body.ShardId);
  const p = body.StartingPosition || {};
  const from = name && s >= 0 ? startIndex(name, s, p.Type, p.SequenceNumber) : -1;
  if (from < 0) {
    refuse(stream, wire, 400, {__type: 'ResourceNotFoundException', message: 'bad consumer or shard'});
    return;
  }
  pushEvents(stream, name, s, from, wire).catch(() => {});
}

const h2 = http2.createServer();
h2.on('sessionError', () => {});
h2.on('stream', (stream, headers) => {
  const chunks = [];
  stream.on('data', (c) => chunks.push(c));
  stream.on('error', () => {});
  stream.on('end', () => {
    const wire = wireOf(headers);
    const [body, refused] = readBody(Buffer.concat(chunks), wire);
    if (refused) return refuse(stream, wire, refused[0], refused[1]);
    if (String(headers['x-amz-target']).endsWith('.SubscribeToShard')) return subscribe(stream, body, wire);
    refuse(stream, wire, 400, {__type: 'UnknownOperationException', message: 'HTTP/2 serves SubscribeToShard'});
  });
});

// The first bytes of a connection choose the protocol: the HTTP/2 preface or HTTP/1.1. Node's
// http2 reads a socket below its JavaScript stream, where bytes already read cannot be put
// back, so an HTTP/2 connection is relayed to the HTTP/2 server's own port (backpressure and
// all, through pipe()).
const server = net.createServer((socket) => {
  socket.on('error', () => {});
  socket.once('data', (first) => {
    if (first.toString('latin1', 0, 3) !== 'PRI') {
      socket.pause();
      socket.unshift(first);
      http1.emit('connection', socket);
      socket.resume();
      return;
    }
    const inner = net.connect(h2.address().port, '127.0.0.1');
    inner.on('error', () => socket.destroy());
    socket.on('close', () => inner.destroy());
    inner.on('close', () => socket.destroy());
    inner.write(first);
    socket.pipe(inner);
    inner.pipe(socket);
  });
});
h2.listen(0, '127.0.0.1', () => server.listen(opts.port, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({port: server.address().port}) + '\n');
}));
process.on('SIGTERM', () => process.exit(0));
