// A scripted SubscribeToShard endpoint for tests: HTTP/2 without TLS (h2c) on 127.0.0.1,
// written on Node's built-in http2 module, for the cases kinesis-local never produces.
//
//   node fanout_server.js --script FILE --log FILE [--tls-key KEY --tls-cert CERT]
//
// With a key and a certificate it serves HTTP/2 over TLS (ALPN h2), as AWS does; else h2c.
// FILE is JSON: {"subscriptions": [[action, ...], [action, ...], ...]}: the n-th
// SubscribeToShard is answered by the n-th list (the last list again when they run out).
// Actions, in order:
//   {"event": {"records": [{"seq": "...", "data": "text", "key": "k"}], "continuation": "..."|null,
//              "millisBehind": 0, "childShards": [...]}}      a SubscribeToShardEvent
//                                           (a record with "noData": true has no Data field)
//   {"initial": true}                       an initial-response event
//   {"exception": "Type", "message": "..."} an exception message inside the 200 stream
//                                           (with "cbor": true its payload is CBOR, as AWS
//                                           sends it to a CBOR subscription)
//   {"httpError": {"status": 400, "type": "ResourceInUseException", "message": "..."}}
//                                           an error answer instead of the stream
//   {"corrupt": true}                       an event whose message CRC is wrong
//   {"resetMidMessage": true}               half a message, then RST_STREAM
//   {"eventInPieces": {"event": {...}, "pieces": N, "gapMs": G}}  an event written in N
//                                           pieces, G ms apart (20 unless given)
//   {"sleepMs": N}
//   {"flood": {"events": N, "records": M, "bytes": B, "from": S}}  N events of M records of
//                                           B bytes as fast as the stream takes them; logs
//                                           how many were written before the client paused
//   {"end": true}                           ends the stream normally (the 5-minute lifetime)
//   {"hold": true}                          keeps the stream open until the client goes
//   {"silence": true}                       the connection goes silent: this stream and every
//                                           later one on its session get nothing more (as a
//                                           dead host whose socket still looks alive)
// With "describeStreamSummary": {"status": S} (or {"notFound": true}) beside "subscriptions",
// DescribeStreamSummary answers with that status (or ResourceNotFound); else, as every other
// operation, UnknownOperationException.
// With "clockAheadMs": N, the server's clock is N ms ahead of the host's: a request whose
// X-Amz-Date is more than 5 minutes off it is refused as AWS refuses it (400
// InvalidSignatureException "Signature expired", with the server's Date), whatever its
// operation; the requests signed right are logged ({"signedAt": X-Amz-Date}).
// With "listShards": {"closed": C}, ListShards answers with the one shard
// shardId-000000000000, closed when C (an EndingSequenceNumber) and open otherwise.
// Prints {"port": P} once listening; logs one JSON line per subscription (its
// StartingPosition) and per flood ("flood" with written / paused counts) to --log.
'use strict';
const http2 = require('http2');
const path = require('path');
const {message} = require(path.join(__dirname, '../../../tools/emulators/event_stream.js'));
const cbor = require(path.join(__dirname, '../../../tools/emulators/cbor.js'));
const fs = require('fs');

const args = process.argv.slice(2);
const arg = (n) => { const i = args.indexOf(n); return i >= 0 ? args[i + 1] : undefined; };
const script = JSON.parse(fs.readFileSync(arg('--script'), 'utf8'));
const logPath = arg('--log');
const log = (o) => fs.appendFileSync(logPath, JSON.stringify(o) + '\n');


function eventMessage(ev, corrupt) {
  const body = {
    Records: (ev.records || []).map((r) => Object.assign(
      r.noData ? {} : {Data: Buffer.from(r.data || '', 'utf8').toString('base64')}, {
        PartitionKey: r.key || 'k',
        SequenceNumber: r.seq,
        ApproximateArrivalTimestamp: 1700000000.5,
      })),
    MillisBehindLatest: ev.millisBehind || 0,
  };
  if (ev.continuation !== undefined && ev.continuation !== null) body.ContinuationSequenceNumber = ev.continuation;
  if (ev.childShards) body.ChildShards = ev.childShards;
  return message({':message-type': 'event', ':event-type': 'SubscribeToShardEvent',
    ':content-type': 'application/json'}, JSON.stringify(body), corrupt);
}

// Sequence number i: 56 digits, increasing with i.
const seq = (i) => '4959033827149025660855969253836157109592157598913' + String(1000000 + i).padStart(7, '0');

let subscriptionCount = 0;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function play(stream, actions) {
  let started = false;
  const start = () => {
    if (started) return;
    started = true;
    stream.respond({':status': 200, 'content-type': 'application/vnd.amazon.eventstream'});
  };
  for (const a of actions) {
    if (stream.destroyed || stream.closed) return;
    if (a.httpError) {
      stream.respond({':status': a.httpError.status, 'content-type': 'application/x-amz-json-1.1',
        'x-amzn-errortype': a.httpError.type});
      stream.end(JSON.stringify({__type: a.httpError.type, message: a.httpError.message || ''}));
      return;
    }
    start();
    if (a.event) stream.write(eventMessage(a.event, false));
    else if (a.initial) stream.write(message({':message-type': 'event', ':event-type': 'initial-response'}, '{}'));
    else if (a.exception) {
      const text = a.message || '';
      stream.write(message({':message-type': 'exception', ':exception-type': a.exception,
        ':content-type': a.cbor ? 'application/x-amz-cbor-1.1' : 'application/json'},
        a.cbor ? cbor.encode({message: text}) : JSON.stringify({message: text})));
    } else if (a.corrupt) stream.write(eventMessage({records: [{seq: seq(999999), data: 'bad'}], continuation: seq(999999)}, true));
    else if (a.resetMidMessage) {
      const m = eventMessage({records: [{seq: seq(888888), data: 'cut'}], continuation: seq(888888)}, false);
      stream.write(m.subarray(0, Math.floor(m.length / 2)));
      await sleep(50);
      stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      return;
    } else if (a.eventInPieces) {
      const m = eventMessage(a.eventInPieces.event, false);
      const n = a.eventInPieces.pieces;
      for (let i = 0; i < n; ++i) {
        stream.write(m.subarray(Math.floor((m.length * i) / n), Math.floor((m.length * (i + 1)) / n)));
        await sleep(a.eventInPieces.gapMs || 20);
      }
    } else if (a.sleepMs) await sleep(a.sleepMs);
    else if (a.flood) {
      const f = a.flood;
      let written = 0;
      let blocked = 0;
      const data = 'x'.repeat(f.bytes || 100);
      for (let e = 0; e < f.events; ++e) {
        const records = [];
        for (let r = 0; r < f.records; ++r) {
          const i = (f.from || 0) + e * f.records + r;
          records.push({seq: seq(i), data: data + ':' + i});
        }
        const ok = stream.write(eventMessage({records, continuation: records[records.length - 1].seq}, false));
        ++written;
        if (!ok) {
          ++blocked;
          // Wait until the client reads again (HTTP/2 flow control), logging the pause.
          log({flood: 'paused', written, bufferedBytes: stream.writableLength});
          await new Promise((r) => stream.once('drain', r));
        }
        if (stream.destroyed) break;
      }
      log({flood: 'done', written, blocked});
    } else if (a.end) {
      stream.end();
      return;
    } else if (a.hold) {
      await new Promise((r) => stream.on('close', r));
      return;
    } else if (a.silence) {
      stream.session.silenced = true;
      await new Promise((r) => stream.on('close', r));
      return;
    }
  }
  if (!stream.destroyed && !stream.closed) stream.end();
}

const server = arg('--tls-key')
  ? http2.createSecureServer({key: fs.readFileSync(arg('--tls-key')), cert: fs.readFileSync(arg('--tls-cert'))})
  : http2.createServer();
let sessions = 0;
server.on('session', () => log({session: ++sessions}));
server.on('stream', (stream, headers) => {
  if (stream.session.silenced) {
    log({silenced: true});
    stream.on('error', () => {});
    return;  // never answered
  }
  const chunks = [];
  stream.on('data', (c) => chunks.push(c));
  stream.on('error', () => {});
  stream.on('end', () => {
    const target = headers['x-amz-target'] || '';
    if (script.clockAheadMs) {
      const now = Date.now() + script.clockAheadMs;
      const amz = headers['x-amz-date'] || '';
      const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amz);
      const signed = m ? Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]) : 0;
      if (Math.abs(now - signed) > 5 * 60 * 1000) {
        log({refusedSignedAt: amz, target});
        stream.respond({':status': 400, 'content-type': 'application/x-amz-json-1.1',
          'date': new Date(now).toUTCString()});
        stream.end(JSON.stringify({__type: 'InvalidSignatureException',
          message: 'Signature expired: ' + amz + ' is now earlier than ' +
            new Date(now - 5 * 60 * 1000).toISOString()}));
        return;
      }
      log({signedAt: amz, target});
    }
    let body = {};
    try { body = JSON.parse(Buffer.concat(chunks).toString('utf8')); } catch (e) { body = {}; }
    if (target === 'Kinesis_20131202.DescribeStreamSummary' && script.describeStreamSummary) {
      // {"describeStreamSummary": {"status": "DELETING"}} or {"notFound": true}
      const d = script.describeStreamSummary;
      log({describeStreamSummary: body.StreamName});
      if (d.notFound) {
        stream.respond({':status': 400, 'content-type': 'application/x-amz-json-1.1'});
        stream.end(JSON.stringify({__type: 'ResourceNotFoundException',
          message: 'Stream ' + body.StreamName + ' under account 1 not found.'}));
        return;
      }
      stream.respond({':status': 200, 'content-type': 'application/x-amz-json-1.1'});
      stream.end(JSON.stringify({StreamDescriptionSummary: {StreamName: body.StreamName,
        StreamARN: 'arn:aws:kinesis:us-east-1:1:stream/' + body.StreamName,
        StreamStatus: d.status || 'ACTIVE', RetentionPeriodHours: 24, OpenShardCount: 1,
        StreamCreationTimestamp: 1700000000, EnhancedMonitoring: []}}));
      return;
    }
    if (target === 'Kinesis_20131202.ListShards' && script.listShards) {
      log({listShards: body.StreamName || null});
      const range = {StartingSequenceNumber: '0'};
      if (script.listShards.closed) range.EndingSequenceNumber = '999999';
      stream.respond({':status': 200, 'content-type': 'application/x-amz-json-1.1'});
      stream.end(JSON.stringify({Shards: [{ShardId: 'shardId-000000000000',
        HashKeyRange: {StartingHashKey: '0',
          EndingHashKey: '340282366920938463463374607431768211455'},
        SequenceNumberRange: range}]}));
      return;
    }
    if (target !== 'Kinesis_20131202.SubscribeToShard') {
      stream.respond({':status': 400, 'content-type': 'application/x-amz-json-1.1'});
      stream.end(JSON.stringify({__type: 'UnknownOperationException', message: target}));
      return;
    }
    const n = subscriptionCount++;
    log({subscription: n, at: Date.now(), shard: body.ShardId, consumer: body.ConsumerARN,
      position: body.StartingPosition, signed: /^AWS4-HMAC-SHA256 Credential=/.test(headers['authorization'] || '')});
    const lists = script.subscriptions;
    play(stream, lists[Math.min(n, lists.length - 1)]).catch(() => {});
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({port: server.address().port}) + '\n');
});
