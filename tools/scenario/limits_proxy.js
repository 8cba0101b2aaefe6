#!/usr/bin/env node
// Limits-faithful HTTP proxy in front of kinesalite and dynalite (a test tool).
//
// The emulators answer as fast and as often as they are asked; AWS does not. This proxy
// listens on 127.0.0.1 (one port per service), forwards every call to its emulator, and on
// the way enforces the Kinesis Data Streams and DynamoDB limits the way AWS counts them:
// per shard, per stream, per account (the proxy models one account) or per table (one
// table = one partition), each over a sliding one-second window. A call past a limit gets
// the answer AWS gives (HTTP 400, the same error type and JSON shape) and is not forwarded.
// Every call is counted by API and key with its peak per-second rate, readable at
// GET /__limits/stats on either port. The limits, with the page each comes from, are the
// LIMITS table below (and docs/limits.md, which `--print-limits` writes).
//
// What is modelled, per API:
//   Kinesis GetRecords         5 calls/s and 2 MiB/s per shard (a token bucket holding one
//                              second; an answer's bytes may put it in debt, and reads are
//                              refused while it is: a 10 MiB answer throttles the shard's reads
//                              for the next 4-5 s); at most 10,000 records and
//                              10 MiB per answer (a larger emulator answer is cut, and the next
//                              iterator asked of the emulator after the last record kept)
//   Kinesis GetShardIterator   5 calls/s per shard
//   Kinesis PutRecords         1,000 records/s and 1 MiB/s per shard (data + partition key),
//                              per record: each record goes to the shard whose hash range holds
//                              the MD5 of its partition key (or its ExplicitHashKey); a record
//                              past its shard's limit is answered as a failed entry
//                              (ProvisionedThroughputExceededException, FailedRecordCount) and
//                              is not written; at most 500 records and 5 MiB a call
//   Kinesis PutRecord          the same per-shard limits, a whole-call error
//   Kinesis control plane      DescribeStreamSummary 20/s, DescribeStream 10/s, ListStreams 5/s,
//                              RegisterStreamConsumer 5/s per account; ListShards 1,000/s and
//                              DescribeStreamConsumer 20/s per stream: LimitExceededException
//   DynamoDB                   Scan/Query pages of at most 1 MB (a larger emulator page is cut
//                              and LastEvaluatedKey set to the last item kept); items of at most
//                              400 KB; BatchWriteItem at most 25 requests, BatchGetItem 100;
//                              3,000 read and 1,000 write units a second per table (on-demand
//                              partition limits), units as the emulator reports them through
//                              ReturnConsumedCapacity (asked by the proxy, removed again from the
//                              answer when the caller did not ask); BatchWriteItem is admitted
//                              item by item, the rest returned in UnprocessedItems.
// Not modelled: SubscribeToShard (HTTP/2, not served by kinesalite), shard-level limits of
// the other write paths, DynamoDB partitions beyond one per table, burst/adaptive capacity.
//
// The shard of a GetRecords call comes from its iterator: the proxy remembers every iterator
// it handed out (GetShardIterator answers, NextShardIterator of GetRecords answers) for 5
// minutes, AWS's iterator lifetime; a call with an iterator it never saw is forwarded and
// counted under the key "?" without a per-shard limit. Shard hash ranges come from the
// emulator (ListShards, asked directly and cached for shardMapTtlMs).
//
// Use as a module: const p = await startLimitsProxy({kinesis: url, dynamodb: url}, opts);
// p.urls, p.stats(), p.reset(), p.close(). Or standalone:
//   node limits_proxy.js --kinesis URL --dynamodb URL [--kinesis-port N] [--dynamodb-port N]
//        [--scale F] [--limit NAME=VALUE]... [--stats-out FILE] [--ignore-stdin]
//   node limits_proxy.js --print-limits      (the limits table as Markdown)
// Standalone it prints {"kinesis":url,"dynamodb":url,"stats":url} and runs until stdin
// closes (unless --ignore-stdin), SIGTERM or SIGINT; --stats-out writes the final stats.
// --scale multiplies every per-second limit (short tests); sizes per call stay AWS's.
'use strict'

const http = require('http')
const crypto = require('crypto')
const fs = require('fs')
const zlib = require('zlib')
const aws = require('./lib/aws')
const proxyHttp = require('./lib/proxy_http')

const KiB = 1024
const MiB = 1024 * 1024

// Documentation pages the limits come from.
const SRC = {
  kdsQuotas: 'https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html',
  getRecords: 'https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetRecords.html',
  getShardIterator: 'https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetShardIterator.html',
  putRecords: 'https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecords.html',
  putRecordsEntry: 'https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecordsResultEntry.html',
  describeStreamSummary: 'https://docs.aws.amazon.com/kinesis/latest/APIReference/API_DescribeStreamSummary.html',
  listShards: 'https://docs.aws.amazon.com/kinesis/latest/APIReference/API_ListShards.html',
  registerStreamConsumer: 'https://docs.aws.amazon.com/kinesis/latest/APIReference/API_RegisterStreamConsumer.html',
  describeStreamConsumer: 'https://docs.aws.amazon.com/kinesis/latest/APIReference/API_DescribeStreamConsumer.html',
  subscribeToShard: 'https://docs.aws.amazon.com/kinesis/latest/APIReference/API_SubscribeToShard.html',
  ddbQuotas: 'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html',
  ddbScan: 'https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Scan.html',
  ddbBatchWrite: 'https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html',
  ddbPartition: 'https://repost.aws/knowledge-center/on-demand-table-throttling-dynamodb',
  ddbUnits: 'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html',
  ddbErrors: 'https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html',
  ddbThrottlingReason: 'https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_ThrottlingReason.html',
}

// Every limit the proxy enforces. rate: a per-second limit (scaled by --scale); otherwise a
// size per call or per answer. error: what AWS answers past it.
const LIMITS = {
  // "Each shard can support up to five read transactions per second" (quotas page, data plane
  // table: GetRecords 5 TPS); GetRecords API reference: 5 TPS per shard.
  getRecordsCallsPerShard: {value: 5, rate: true, per: 'shard', what: 'GetRecords calls/s',
    error: 'ProvisionedThroughputExceededException', source: SRC.kdsQuotas},
  // "up to a maximum total data read rate of 2 MiB per second" per shard; "If a call returns
  // this amount of data [10 MiB], subsequent calls made within the next 5 seconds throw
  // ProvisionedThroughputExceededException" (GetRecords API reference).
  getRecordsBytesPerShard: {value: 2 * MiB, rate: true, per: 'shard', what: 'GetRecords bytes/s (a bucket of one second; a 10 MiB answer blocks reads 4-5 s)',
    error: 'ProvisionedThroughputExceededException', source: SRC.getRecords},
  // "The maximum number of records that can be returned per call is 10,000." (GetRecords)
  getRecordsMaxRecords: {value: 10000, per: 'answer', what: 'GetRecords records per answer',
    error: 'answer cut (Limit clamped)', source: SRC.getRecords},
  // "The maximum size of data that GetRecords can return is 10 MiB." (GetRecords)
  getRecordsMaxBytes: {value: 10 * MiB, per: 'answer', what: 'GetRecords bytes per answer',
    error: 'answer cut, NextShardIterator after the last record kept', source: SRC.getRecords},
  // "GetShardIterator has a limit of five transactions per second per account per open shard."
  // and "If a GetShardIterator request is made too often, you receive a
  // ProvisionedThroughputExceededException." (GetShardIterator API reference)
  getShardIteratorCallsPerShard: {value: 5, rate: true, per: 'shard', what: 'GetShardIterator calls/s',
    error: 'ProvisionedThroughputExceededException', source: SRC.getShardIterator},
  // "Each shard can support writes up to 1,000 records per second, up to a maximum data write
  // total of 1 MiB per second." (PutRecords API reference); the failed entry carries
  // ProvisionedThroughputExceededException (PutRecordsResultEntry).
  putRecordsPerShard: {value: 1000, rate: true, per: 'shard', what: 'records written/s (PutRecords, PutRecord)',
    error: 'ProvisionedThroughputExceededException (per record in PutRecords)', source: SRC.putRecords},
  putBytesPerShard: {value: 1 * MiB, rate: true, per: 'shard', what: 'bytes written/s, data + partition key',
    error: 'ProvisionedThroughputExceededException (per record in PutRecords)', source: SRC.putRecords},
  // "Each PutRecords request can support up to 500 records. Each record in the request can be
  // as large as 1 MiB, up to a limit of 5 MiB for the entire request, including partition
  // keys." (PutRecords API reference)
  putRecordsMaxRecords: {value: 500, per: 'call', what: 'records per PutRecords call',
    error: 'ValidationException', source: SRC.putRecords},
  putRecordsMaxBytes: {value: 5 * MiB, per: 'call', what: 'bytes per PutRecords call, data + partition keys',
    error: 'InvalidArgumentException', source: SRC.putRecords},
  // "DescribeStreamSummary has a limit of 20 transactions per second per account."
  describeStreamSummaryCalls: {value: 20, rate: true, per: 'account', what: 'DescribeStreamSummary calls/s',
    error: 'LimitExceededException', source: SRC.describeStreamSummary},
  // Quotas page, control plane table: DescribeStream 10 TPS, ListStreams 5 TPS (per account).
  describeStreamCalls: {value: 10, rate: true, per: 'account', what: 'DescribeStream calls/s',
    error: 'LimitExceededException', source: SRC.kdsQuotas},
  listStreamsCalls: {value: 5, rate: true, per: 'account', what: 'ListStreams calls/s',
    error: 'LimitExceededException', source: SRC.kdsQuotas},
  // "This operation has a limit of 1000 transactions per second per data stream." (ListShards
  // API reference; older editions of the quotas page list 100 TPS.)
  listShardsCallsPerStream: {value: 1000, rate: true, per: 'stream', what: 'ListShards calls/s',
    error: 'LimitExceededException', source: SRC.listShards},
  // "The use of this operation has a limit of five transactions per second per account."
  registerStreamConsumerCalls: {value: 5, rate: true, per: 'account', what: 'RegisterStreamConsumer calls/s',
    error: 'LimitExceededException', source: SRC.registerStreamConsumer},
  // "This operation has a limit of 20 transactions per second per stream." (the quotas page's
  // control plane table lists 20 TPS without saying per stream; the API reference is followed)
  describeStreamConsumerCallsPerStream: {value: 20, rate: true, per: 'stream', what: 'DescribeStreamConsumer calls/s',
    error: 'LimitExceededException', source: SRC.describeStreamConsumer},
  // "If the total size of scanned items exceeds the maximum dataset size limit of 1 MB, the
  // scan completes and results are returned ... The LastEvaluatedKey value is also returned"
  // (Scan API reference; Query the same). 1 MB = 1024 KB (quotas page).
  ddbPageBytes: {value: 1 * MiB, per: 'answer', what: 'Scan/Query bytes per page',
    error: 'page cut, LastEvaluatedKey set', source: SRC.ddbScan},
  // Item size 400 KB, "including both attribute name binary length and attribute value lengths"
  // (quotas page).
  ddbItemBytes: {value: 400 * KiB, per: 'item', what: 'item size (PutItem, BatchWriteItem puts)',
    error: 'ValidationException', source: SRC.ddbQuotas},
  // "A single call to BatchWriteItem can transmit up to 16MB of data over the network,
  // consisting of up to 25 item put or delete operations." (BatchWriteItem API reference)
  ddbBatchWriteItems: {value: 25, per: 'call', what: 'requests per BatchWriteItem call',
    error: 'ValidationException', source: SRC.ddbBatchWrite},
  // BatchGetItem: up to 100 items a call (read-write-operations page).
  ddbBatchGetItems: {value: 100, per: 'call', what: 'keys per BatchGetItem call',
    error: 'ValidationException', source: SRC.ddbUnits},
  // "Each partition on the table can serve up to 3,000 read request units or 1,000 write
  // request units" (on-demand throttling knowledge-center article); the error is
  // ProvisionedThroughputExceededException with ThrottlingReasons *KeyRangeThroughputExceeded.
  ddbReadUnitsPerTable: {value: 3000, rate: true, per: 'table', what: 'read units/s (one partition per table)',
    error: 'ProvisionedThroughputExceededException', source: SRC.ddbPartition},
  ddbWriteUnitsPerTable: {value: 1000, rate: true, per: 'table', what: 'write units/s (one partition per table)',
    error: 'ProvisionedThroughputExceededException', source: SRC.ddbPartition},
}

const ITERATOR_LIFETIME_MS = 5 * 60 * 1000  // "A shard iterator expires 5 minutes after it is returned" (GetShardIterator)

// ------------------------------------------------------------------- sliding windows --

// Amounts with an expiry time; sum() is what has not expired. Entries usually expire in
// the order they were added; a longer one (a large GetRecords answer) is inserted in order.
class Window {
  constructor() {
    this.entries = []  // [expiresAt, amount], sorted by expiresAt
    this.head = 0
    this.total = 0
  }
  prune(now) {
    while (this.head < this.entries.length && this.entries[this.head][0] <= now) {
      this.total -= this.entries[this.head][1]
      this.head++
    }
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head)
      this.head = 0
    }
  }
  sum(now) {
    this.prune(now)
    return this.total
  }
  add(now, amount, spanMs = 1000) {
    this.prune(now)
    const e = [now + spanMs, amount]
    let i = this.entries.length
    while (i > this.head && this.entries[i - 1][0] > e[0]) i--
    this.entries.splice(i, 0, e)
    this.total += amount
    return this.total
  }
}

// A counted quantity of one key: total, the amount in the last second, and the peak of that.
class Meter {
  constructor() {
    this.totalAmount = 0
    this.peak = 0
    this.window = new Window()
  }
  add(now, amount) {
    this.totalAmount += amount
    const s = this.window.add(now, amount)
    if (s > this.peak) this.peak = s
  }
  view() {
    return {total: round(this.totalAmount), peakPerSecond: round(this.peak)}
  }
}

const round = (x) => Math.round(x * 1000) / 1000

// ---------------------------------------------------------------------- item sizes --

const utf8 = (s) => Buffer.byteLength(String(s), 'utf8')
const b64len = (s) => {
  s = String(s || '')
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0
  return Math.floor((s.length * 3) / 4) - pad
}

// DynamoDB's size of a value: strings and binaries their bytes, numbers about one byte per
// two significant digits plus one, lists and maps 3 bytes plus one per element.
function ddbValueSize(v) {
  if (!v || typeof v !== 'object') return 0
  if ('S' in v) return utf8(v.S)
  if ('N' in v) return numberSize(v.N)
  if ('B' in v) return b64len(v.B)
  if ('BOOL' in v || 'NULL' in v) return 1
  if ('SS' in v) return v.SS.reduce((a, s) => a + utf8(s), 0)
  if ('NS' in v) return v.NS.reduce((a, s) => a + numberSize(s), 0)
  if ('BS' in v) return v.BS.reduce((a, s) => a + b64len(s), 0)
  if ('L' in v) return 3 + v.L.reduce((a, x) => a + 1 + ddbValueSize(x), 0)
  if ('M' in v) return 3 + Object.entries(v.M).reduce((a, [k, x]) => a + 1 + utf8(k) + ddbValueSize(x), 0)
  return 0
}
function numberSize(n) {
  const digits = String(n).replace(/^[-+]/, '').replace(/e.*$/i, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '')
  return Math.ceil(Math.max(1, digits.length) / 2) + 1
}
function ddbItemSize(item) {
  let size = 0
  for (const [k, v] of Object.entries(item || {})) size += utf8(k) + ddbValueSize(v)
  return size
}

// ------------------------------------------------------------------------ the proxy --

// opts: scale (default 1), limits: {name: value} overrides (after scaling), shardMapTtlMs,
// log(line).
async function startLimitsProxy(upstreams, opts = {}) {
  const scale = opts.scale == null ? 1 : Number(opts.scale)
  if (!(scale > 0)) throw new Error('limits proxy: scale must be > 0')
  const limit = {}
  for (const [name, l] of Object.entries(LIMITS)) limit[name] = l.rate ? l.value * scale : l.value
  for (const [name, v] of Object.entries(opts.limits || {})) {
    if (!(name in LIMITS)) throw new Error(`limits proxy: unknown limit ${name} (known: ${Object.keys(LIMITS).join(', ')})`)
    if (!(Number(v) > 0)) throw new Error(`limits proxy: limit ${name} must be > 0, not ${v}`)
    limit[name] = Number(v)
  }
  const shardMapTtlMs = opts.shardMapTtlMs == null ? 1000 : opts.shardMapTtlMs
  const log = opts.log || (() => {})
  const agent = new http.Agent({keepAlive: true, maxSockets: 128})

  // ---- counters
  let since = Date.now()
  let apis = new Map()  // "service.Op" -> {calls, throttled, all: Meter, keys: Map(key -> {calls, throttled, arrivals, admitted, meters})}
  let throttles = 0
  // Enforcement windows, by limit name and key.
  let windows = new Map()
  function win(name, key) {
    const id = name + '\u0000' + key
    let w = windows.get(id)
    if (!w) windows.set(id, (w = new Window()))
    return w
  }
  function apiStats(api) {
    let a = apis.get(api)
    if (!a) apis.set(api, (a = {calls: 0, throttled: 0, all: new Meter(), keys: new Map()}))
    return a
  }
  function keyStats(api, key) {
    const a = apiStats(api)
    let k = a.keys.get(key)
    if (!k) a.keys.set(key, (k = {calls: 0, throttled: 0, arrivals: new Meter(), admitted: new Meter(), meters: {}}))
    return k
  }
  // One call arrived (counted whether admitted or not). A call touching several keys (a
  // PutRecords over several shards) counts once for the API (whole) and once for each key.
  function arrive(api, key, now, whole = true) {
    const a = apiStats(api)
    if (whole) {
      a.calls++
      a.all.add(now, 1)
    }
    const k = keyStats(api, key)
    k.calls++
    k.arrivals.add(now, 1)
    return k
  }
  function admitted(api, key, now) {
    keyStats(api, key).admitted.add(now, 1)
  }
  function throttled(api, key, why) {
    apiStats(api).throttled++
    keyStats(api, key).throttled++
    throttles++
    log(`throttled ${api} ${key}: ${why}`)
  }
  function measure(api, key, what, now, amount) {
    const k = keyStats(api, key)
    if (!k.meters[what]) k.meters[what] = new Meter()
    k.meters[what].add(now, amount)
  }

  function stats() {
    const now = Date.now()
    const out = {since: new Date(since).toISOString(), seconds: round((now - since) / 1000), scale, throttles,
      limits: limit, apis: {}}
    for (const [api, a] of [...apis.entries()].sort()) {
      const keys = {}
      let peakPerKey = 0
      for (const [key, k] of [...a.keys.entries()].sort()) {
        const view = {calls: k.calls, throttled: k.throttled, peakPerSecond: k.arrivals.peak,
          peakAdmittedPerSecond: k.admitted.peak}
        for (const [what, m] of Object.entries(k.meters)) view[what] = m.view()
        keys[key] = view
        peakPerKey = Math.max(peakPerKey, k.arrivals.peak)
      }
      out.apis[api] = {calls: a.calls, throttled: a.throttled, peakPerSecond: a.all.peak, peakPerKey, keys}
    }
    return out
  }
  function reset() {
    since = Date.now()
    apis = new Map()
    windows = new Map()
    readClocks = new Map()
    throttles = 0
  }

  // ---- HTTP plumbing (lib/proxy_http.js, shared with fault_proxy.js)
  const forward = (up, req, body, cb) => proxyHttp.forward(agent, up, req, body, cb)
  const forwardP = (up, req, body) =>
    new Promise((resolve, reject) =>
      forward(up, req, body, (err, status, headers, rbody) => (err ? reject(err) : resolve({status, headers, body: rbody}))))
  const reply = proxyHttp.reply
  // A JSON answer built or rewritten by the proxy. DynamoDB answers carry a CRC32 of the body.
  function replyJson(res, service, status, headers, obj) {
    const body = Buffer.from(JSON.stringify(obj))
    const h = {...headers}
    h['content-type'] = service === 'dynamodb' ? 'application/x-amz-json-1.0' : 'application/x-amz-json-1.1'
    if ('x-amz-crc32' in h) {
      if (typeof zlib.crc32 === 'function') h['x-amz-crc32'] = String(zlib.crc32(body))
      else delete h['x-amz-crc32']
    }
    reply(res, status, h, body)
  }
  let requestNo = 0
  function respondError(res, service, type, message, extra = {}) {
    const prefix = service === 'dynamodb' ? 'com.amazonaws.dynamodb.v20120810#' : ''
    const h = {'x-amzn-errortype': type, 'x-amzn-requestid': 'limits-proxy-' + ++requestNo}
    if (service === 'dynamodb') h['x-amz-crc32'] = ''
    replyJson(res, service, 400, h, {__type: prefix + type, message, ...extra})
  }

  // ---- Kinesis helpers
  const iterators = new Map()  // iterator -> {key, stream, shard, expires}
  let iteratorSweepAt = 0
  function rememberIterator(it, stream, shard, now) {
    if (!it) return
    iterators.set(it, {stream, shard, key: stream + '/' + shard, expires: now + ITERATOR_LIFETIME_MS})
    if (now > iteratorSweepAt) {
      iteratorSweepAt = now + 10000
      for (const [k, v] of iterators) if (v.expires <= now) iterators.delete(k)
    }
  }
  const listShardsTokens = new Map()  // NextToken -> stream
  function streamOf(data) {
    if (data.StreamName) return String(data.StreamName)
    const arn = String(data.StreamARN || data.ConsumerARN || '')
    const m = /:stream\/([^/]+)/.exec(arn)
    if (m) return m[1]
    if (data.NextToken && listShardsTokens.has(data.NextToken)) return listShardsTokens.get(data.NextToken)
    return '?'
  }
  const shardMaps = new Map()  // stream -> {at, shards: [{id, lo, hi}], account, pending}
  // A map past its time is reloaded in the background and used meanwhile, so that a call is
  // counted when it arrived, not after the proxy's own ListShards (which, behind a busy
  // emulator, can take long enough to move a write into the shard's next second); one known
  // to be wrong (checkShards() saw a write land elsewhere: at = 0) is waited for.
  async function shardMap(stream, now, force = false) {
    let m = shardMaps.get(stream)
    if (m && !force && now - m.at < shardMapTtlMs) return m
    if (m && m.pending) return m.at > 0 && !force ? m : m.pending
    const load = (async () => {
      const shards = []
      let token = null
      do {
        const r = await aws.kinesis(upstreams.kinesis, 'ListShards', token ? {NextToken: token} : {StreamName: stream})
        for (const s of r.Shards || []) {
          if (s.SequenceNumberRange && s.SequenceNumberRange.EndingSequenceNumber) continue
          shards.push({id: s.ShardId, lo: BigInt(s.HashKeyRange.StartingHashKey), hi: BigInt(s.HashKeyRange.EndingHashKey)})
        }
        token = r.NextToken
      } while (token)
      let account = m && m.account
      if (!account) {
        try {
          const d = await aws.kinesis(upstreams.kinesis, 'DescribeStreamSummary', {StreamName: stream})
          account = (/:(\d{12}):/.exec(d.StreamDescriptionSummary.StreamARN || '') || [])[1]
        } catch (e) {
          account = null
        }
      }
      const fresh = {at: Date.now(), shards, account: account || '000000000000', pending: null}
      shardMaps.set(stream, fresh)
      return fresh
    })()
    if (m) m.pending = load
    const settled = load.finally(() => {
      if (m) m.pending = null
    })
    if (m && m.at > 0 && !force) {
      settled.catch(() => {})  // the stale map serves until a load succeeds
      return m
    }
    return await settled
  }
  function shardFor(map, rec) {
    let h
    if (rec.ExplicitHashKey != null && rec.ExplicitHashKey !== '') {
      try {
        h = BigInt(String(rec.ExplicitHashKey))
      } catch (e) {
        return null
      }
    } else {
      h = BigInt('0x' + crypto.createHash('md5').update(String(rec.PartitionKey == null ? '' : rec.PartitionKey), 'utf8').digest('hex'))
    }
    for (const s of map.shards) if (h >= s.lo && h <= s.hi) return s.id
    return null
  }
  const recordBytes = (r) => b64len(r.Data) + utf8(r.PartitionKey == null ? '' : r.PartitionKey)
  const rateMsg = (shard, stream, account) => `Rate exceeded for shard ${shard} in stream ${stream} under account ${account}.`

  // Per-second call limit on a key: true when admitted (and then counted).
  function admitCall(name, key, now) {
    const w = win(name, key)
    if (w.sum(now) + 1 > limit[name]) return false
    w.add(now, 1)
    return true
  }

  // ---- Kinesis handlers: each returns after answering.
  const controlPlane = {
    DescribeStreamSummary: {limit: 'describeStreamSummaryCalls', scope: 'account'},
    DescribeStream: {limit: 'describeStreamCalls', scope: 'account'},
    ListStreams: {limit: 'listStreamsCalls', scope: 'account'},
    RegisterStreamConsumer: {limit: 'registerStreamConsumerCalls', scope: 'account'},
    ListShards: {limit: 'listShardsCallsPerStream', scope: 'stream'},
    DescribeStreamConsumer: {limit: 'describeStreamConsumerCallsPerStream', scope: 'stream'},
  }

  async function kinesisCall(op, data, up, req, res, raw, now) {
    const api = 'kinesis.' + op
    const cp = controlPlane[op]
    if (cp) {
      const key = cp.scope === 'account' ? 'account' : streamOf(data)
      arrive(api, key, now)
      if (!admitCall(cp.limit, key, now)) {
        throttled(api, key, `${limit[cp.limit]} calls/s per ${cp.scope}`)
        return respondError(res, 'kinesis', 'LimitExceededException',
          `Rate exceeded for ${op} ` + (cp.scope === 'account' ? 'under this account' : `on stream ${key}`) +
          ` (limit ${limit[cp.limit]} calls per second per ${cp.scope}; limits proxy)`)
      }
      admitted(api, key, now)
      const r = await forwardP(up, req, raw)
      if (op === 'ListShards' && r.status === 200) {
        try {
          const body = JSON.parse(r.body.toString('utf8'))
          if (body.NextToken) listShardsTokens.set(body.NextToken, key)
          if (listShardsTokens.size > 10000) listShardsTokens.clear()
        } catch (e) {
          // not JSON: passed on as it is
        }
      }
      return reply(res, r.status, r.headers, r.body)
    }
    if (op === 'GetShardIterator') {
      const stream = streamOf(data)
      const shard = String(data.ShardId || '?')
      const key = stream + '/' + shard
      arrive(api, key, now)
      if (!admitCall('getShardIteratorCallsPerShard', key, now)) {
        throttled(api, key, `${limit.getShardIteratorCallsPerShard} calls/s per shard`)
        const map = shardMaps.get(stream)
        return respondError(res, 'kinesis', 'ProvisionedThroughputExceededException',
          rateMsg(shard, stream, (map && map.account) || '000000000000'))
      }
      admitted(api, key, now)
      const r = await forwardP(up, req, raw)
      if (r.status === 200) {
        try {
          rememberIterator(JSON.parse(r.body.toString('utf8')).ShardIterator, stream, shard, Date.now())
        } catch (e) {
          // not JSON
        }
      }
      return reply(res, r.status, r.headers, r.body)
    }
    if (op === 'GetRecords') return getRecords(api, data, up, req, res, raw, now)
    if (op === 'PutRecords') return putRecords(api, data, up, req, res, raw, now)
    if (op === 'PutRecord') return putRecord(api, data, up, req, res, raw, now)
    // Anything else: counted, not limited.
    arrive(api, streamOf(data), now)
    admitted(api, streamOf(data), now)
    const r = await forwardP(up, req, raw)
    return reply(res, r.status, r.headers, r.body)
  }

  // The read bytes of a shard as a token bucket: 2 MiB/s, holding at most one second of it.
  // The clock is the time at which the bytes read so far would have been paid for; it never
  // lags more than a second behind now (a full bucket). Reads are refused while it is ahead
  // of now (in debt): a 10 MiB answer taken from a drained bucket refuses the shard's reads
  // for 5 s, from a full one for 4 s.
  let readClocks = new Map()
  function readClock(key, now) {
    const c = readClocks.get(key)
    return c == null ? now - 1000 : Math.max(c, now - 1000)
  }

  async function getRecords(api, data, up, req, res, raw, now) {
    const it = iterators.get(data.ShardIterator)
    const key = it ? it.key : '?'
    arrive(api, key, now)
    if (it) {
      const callsWin = win('getRecordsCallsPerShard', key)
      const map = shardMaps.get(it.stream)
      const account = (map && map.account) || '000000000000'
      if (callsWin.sum(now) + 1 > limit.getRecordsCallsPerShard) {
        throttled(api, key, `${limit.getRecordsCallsPerShard} calls/s per shard`)
        return respondError(res, 'kinesis', 'ProvisionedThroughputExceededException', rateMsg(it.shard, it.stream, account))
      }
      if (readClock(key, now) > now) {
        throttled(api, key, `${limit.getRecordsBytesPerShard} bytes/s per shard`)
        return respondError(res, 'kinesis', 'ProvisionedThroughputExceededException', rateMsg(it.shard, it.stream, account))
      }
      callsWin.add(now, 1)
    }
    admitted(api, key, now)
    // AWS answers at most 10,000 records: a missing Limit becomes that (a Limit above it is
    // refused by the emulator's own validation, as by AWS's).
    const body = data.Limit == null ? Buffer.from(JSON.stringify({...data, Limit: limit.getRecordsMaxRecords})) : raw
    const r = await forwardP(up, req, body)
    if (r.status !== 200) return reply(res, r.status, r.headers, r.body)
    let out
    try {
      out = JSON.parse(r.body.toString('utf8'))
    } catch (e) {
      return reply(res, r.status, r.headers, r.body)
    }
    const records = out.Records || []
    let bytes = 0
    let keep = records.length
    for (let i = 0; i < records.length; i++) {
      const b = recordBytes(records[i])
      if (i > 0 && bytes + b > limit.getRecordsMaxBytes) {
        keep = i
        break
      }
      bytes += b
    }
    if (keep > limit.getRecordsMaxRecords) {
      keep = limit.getRecordsMaxRecords
      bytes = records.slice(0, keep).reduce((a, x) => a + recordBytes(x), 0)
    }
    const done = Date.now()
    let changed = false
    if (keep < records.length && it) {
      // Cut as AWS would: the next iterator starts after the last record kept.
      const last = records[keep - 1].SequenceNumber
      const g = await aws.kinesis(upstreams.kinesis, 'GetShardIterator', {StreamName: it.stream, ShardId: it.shard,
        ShardIteratorType: 'AFTER_SEQUENCE_NUMBER', StartingSequenceNumber: last})
      out.Records = records.slice(0, keep)
      out.NextShardIterator = g.ShardIterator
      if (!out.MillisBehindLatest) out.MillisBehindLatest = 1
      changed = true
      measure(api, key, 'cutAnswers', done, 1)
    }
    if (it) {
      rememberIterator(out.NextShardIterator, it.stream, it.shard, done)
      // The answer's bytes come out of the shard's read bucket, possibly into debt.
      readClocks.set(key, readClock(key, done) + (bytes / limit.getRecordsBytesPerShard) * 1000)
    }
    measure(api, key, 'records', done, Math.min(keep, records.length))
    measure(api, key, 'bytes', done, bytes)
    if (changed) return replyJson(res, 'kinesis', 200, r.headers, out)
    return reply(res, r.status, r.headers, r.body)
  }

  // Admits n records of b bytes on a shard's write limits; true when admitted (then counted).
  function admitWrite(key, now, n, b) {
    const rw = win('putRecordsPerShard', key)
    const bw = win('putBytesPerShard', key)
    if (rw.sum(now) + n > limit.putRecordsPerShard || bw.sum(now) + b > limit.putBytesPerShard) return false
    rw.add(now, n)
    bw.add(now, b)
    return true
  }

  async function putRecords(api, data, up, req, res, raw, now) {
    const stream = streamOf(data)
    const recs = Array.isArray(data.Records) ? data.Records : []
    const total = recs.reduce((a, r) => a + recordBytes(r), 0)
    if (recs.length > limit.putRecordsMaxRecords) {
      arrive(api, stream, now)
      return respondError(res, 'kinesis', 'ValidationException',
        `1 validation error detected: Value at 'records' failed to satisfy constraint: Member must have length less ` +
        `than or equal to ${limit.putRecordsMaxRecords} (${recs.length} records; limits proxy)`)
    }
    if (total > limit.putRecordsMaxBytes) {
      arrive(api, stream, now)
      return respondError(res, 'kinesis', 'InvalidArgumentException',
        `Records size exceeds ${limit.putRecordsMaxBytes} bytes: ${total} bytes including partition keys (limits proxy)`)
    }
    let map
    try {
      map = await shardMap(stream, now)
    } catch (e) {
      // Unknown stream or emulator trouble: the emulator answers the call itself.
      arrive(api, stream, now)
      const r = await forwardP(up, req, raw)
      return reply(res, r.status, r.headers, r.body)
    }
    now = Date.now()
    const results = new Array(recs.length)
    const pass = []
    const keys = new Map()  // shard key -> {records, bytes}
    for (let i = 0; i < recs.length; i++) {
      const shard = shardFor(map, recs[i])
      if (!shard) {
        pass.push(i)
        continue
      }
      const key = stream + '/' + shard
      const b = recordBytes(recs[i])
      if (!keys.has(key)) keys.set(key, {shard, records: 0, bytes: 0, throttled: 0})
      const k = keys.get(key)
      if (admitWrite(key, now, 1, b)) {
        pass.push(i)
        k.records++
        k.bytes += b
      } else {
        k.throttled++
        results[i] = {ErrorCode: 'ProvisionedThroughputExceededException', ErrorMessage: rateMsg(shard, stream, map.account)}
      }
    }
    apiStats(api).calls++
    apiStats(api).all.add(now, 1)
    for (const [key, k] of keys) {
      arrive(api, key, now, false)
      if (k.records) {
        admitted(api, key, now)
        measure(api, key, 'records', now, k.records)
        measure(api, key, 'bytes', now, k.bytes)
      }
      if (k.throttled) {
        throttled(api, key, `${k.throttled} records past ${limit.putRecordsPerShard} records/s or ${limit.putBytesPerShard} bytes/s`)
        measure(api, key, 'throttledRecords', now, k.throttled)
      }
    }
    if (pass.length === recs.length) {
      const r = await forwardP(up, req, raw)
      checkShards(r, recs, map, stream)
      return reply(res, r.status, r.headers, r.body)
    }
    let failed = recs.length - pass.length
    let headers = {'x-amzn-requestid': 'limits-proxy-' + ++requestNo}
    if (pass.length) {
      const sub = {...data, Records: pass.map((i) => recs[i])}
      const r = await forwardP(up, req, Buffer.from(JSON.stringify(sub)))
      if (r.status !== 200) return reply(res, r.status, r.headers, r.body)
      let out
      try {
        out = JSON.parse(r.body.toString('utf8'))
      } catch (e) {
        return reply(res, r.status, r.headers, r.body)
      }
      checkShards(r, pass.map((i) => recs[i]), map, stream)
      headers = r.headers
      pass.forEach((i, j) => {
        results[i] = out.Records[j]
        if (out.Records[j] && out.Records[j].ErrorCode) failed++
      })
      const answer = {...out, FailedRecordCount: failed, Records: results}
      return replyJson(res, 'kinesis', 200, headers, answer)
    }
    return replyJson(res, 'kinesis', 200, headers, {FailedRecordCount: failed, Records: results})
  }
  // The emulator's ShardIds against the proxy's prediction: a difference means the shard
  // map is stale (a reshard); it is reloaded before the next write.
  function checkShards(r, recs, map, stream) {
    if (r.status !== 200) return
    try {
      const out = JSON.parse(r.body.toString('utf8'))
      const list = out.Records || (out.ShardId ? [out] : [])
      for (let i = 0; i < list.length; i++) {
        if (list[i].ShardId && list[i].ShardId !== shardFor(map, recs[i])) {
          const m = shardMaps.get(stream)
          if (m) m.at = 0
          return
        }
      }
    } catch (e) {
      // not JSON
    }
  }

  async function putRecord(api, data, up, req, res, raw, now) {
    const stream = streamOf(data)
    let map
    try {
      map = await shardMap(stream, now)
    } catch (e) {
      arrive(api, stream, now)
      const r = await forwardP(up, req, raw)
      return reply(res, r.status, r.headers, r.body)
    }
    now = Date.now()
    const shard = shardFor(map, data)
    const key = shard ? stream + '/' + shard : stream
    arrive(api, key, now)
    const b = recordBytes(data)
    if (shard && !admitWrite(key, now, 1, b)) {
      throttled(api, key, 'records or bytes per second per shard')
      return respondError(res, 'kinesis', 'ProvisionedThroughputExceededException', rateMsg(shard, stream, map.account))
    }
    admitted(api, key, now)
    measure(api, key, 'records', now, 1)
    measure(api, key, 'bytes', now, b)
    const r = await forwardP(up, req, raw)
    checkShards(r, [data], map, stream)
    return reply(res, r.status, r.headers, r.body)
  }

  // ---- DynamoDB
  const tableKeys = new Map()  // table -> {at, table: [names], indexes: {name: [names]}, arn}
  async function keySchema(table) {
    const c = tableKeys.get(table)
    if (c && Date.now() - c.at < 10000) return c
    const d = (await aws.dynamodb(upstreams.dynamodb, 'DescribeTable', {TableName: table})).Table
    const names = (ks) => (ks || []).map((k) => k.AttributeName)
    const indexes = {}
    for (const ix of [...(d.GlobalSecondaryIndexes || []), ...(d.LocalSecondaryIndexes || [])]) indexes[ix.IndexName] = names(ix.KeySchema)
    const v = {at: Date.now(), table: names(d.KeySchema), indexes, arn: d.TableArn}
    tableKeys.set(table, v)
    return v
  }
  const tableArn = (table) => {
    const c = tableKeys.get(table)
    return (c && c.arn) || `arn:aws:dynamodb:us-east-1:000000000000:table/${table}`
  }
  const READS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem'])
  const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem'])
  function ddbThrottle(res, api, table, kind, now) {
    throttled(api, table, `${kind} units past ${kind === 'read' ? limit.ddbReadUnitsPerTable : limit.ddbWriteUnitsPerTable}/s`)
    return respondError(res, 'dynamodb', 'ProvisionedThroughputExceededException',
      `Throughput exceeds the ${kind} capacity of a partition of table ${table} ` +
      `(${kind === 'read' ? limit.ddbReadUnitsPerTable : limit.ddbWriteUnitsPerTable} ${kind} units per second; limits proxy)`,
      {ThrottlingReasons: [{reason: kind === 'read' ? 'TableReadKeyRangeThroughputExceeded' : 'TableWriteKeyRangeThroughputExceeded',
        resource: tableArn(table)}]})
  }
  const unitsWin = (kind, table) => win(kind === 'read' ? 'ddbReadUnitsPerTable' : 'ddbWriteUnitsPerTable', table)
  const unitsLimit = (kind) => (kind === 'read' ? limit.ddbReadUnitsPerTable : limit.ddbWriteUnitsPerTable)
  function chargeUnits(api, table, kind, units, now) {
    if (!(units > 0)) return
    unitsWin(kind, table).add(now, units)
    measure(api, table, kind + 'Units', now, units)
  }
  // ConsumedCapacity of an answer (one object, or a list for batch calls), per table.
  function consumedByTable(cc) {
    const out = new Map()
    for (const c of Array.isArray(cc) ? cc : cc ? [cc] : []) {
      if (c && c.TableName) out.set(c.TableName, (out.get(c.TableName) || 0) + Number(c.CapacityUnits || 0))
    }
    return out
  }

  async function dynamoCall(op, data, up, req, res, raw, now) {
    const api = 'dynamodb.' + op
    const tables = data.RequestItems ? Object.keys(data.RequestItems) : data.TableName ? [String(data.TableName)] : []
    const mainKey = tables.length === 1 ? tables[0] : tables.length ? tables.join(',') : '-'
    if (!READS.has(op) && !WRITES.has(op)) {
      arrive(api, mainKey, now)
      admitted(api, mainKey, now)
      const r = await forwardP(up, req, raw)
      return reply(res, r.status, r.headers, r.body)
    }
    arrive(api, mainKey, now)
    // Sizes per call and per item.
    if (op === 'BatchWriteItem') {
      const n = tables.reduce((a, t) => a + (data.RequestItems[t] || []).length, 0)
      if (n > limit.ddbBatchWriteItems) {
        return respondError(res, 'dynamodb', 'ValidationException', 'Too many items requested for the BatchWriteItem call')
      }
    }
    if (op === 'BatchGetItem') {
      const n = tables.reduce((a, t) => a + ((data.RequestItems[t] || {}).Keys || []).length, 0)
      if (n > limit.ddbBatchGetItems) {
        return respondError(res, 'dynamodb', 'ValidationException', 'Too many items requested for the BatchGetItem call')
      }
    }
    const putItems = op === 'PutItem' ? [data.Item] : op === 'BatchWriteItem'
      ? tables.flatMap((t) => (data.RequestItems[t] || []).filter((w) => w.PutRequest).map((w) => w.PutRequest.Item)) : []
    for (const item of putItems) {
      if (ddbItemSize(item) > limit.ddbItemBytes) {
        return respondError(res, 'dynamodb', 'ValidationException', 'Item size has exceeded the maximum allowed size')
      }
    }
    const kind = READS.has(op) ? 'read' : 'write'
    const askedCapacity = data.ReturnConsumedCapacity && data.ReturnConsumedCapacity !== 'NONE'
    const send = {...data}
    if (!askedCapacity) send.ReturnConsumedCapacity = 'TOTAL'
    let unprocessed = null
    if (op === 'BatchWriteItem') {
      // Admitted request by request on each table's write units; the rest is returned unprocessed.
      send.RequestItems = {}
      unprocessed = {}
      for (const t of tables) {
        const w = unitsWin('write', t)
        let used = w.sum(now)
        for (const wr of data.RequestItems[t] || []) {
          const units = wr.PutRequest ? Math.max(1, Math.ceil(ddbItemSize(wr.PutRequest.Item) / KiB)) : 1
          if (used < unitsLimit('write')) {
            used += units
            ;(send.RequestItems[t] = send.RequestItems[t] || []).push(wr)
          } else {
            ;(unprocessed[t] = unprocessed[t] || []).push(wr)
          }
        }
      }
      const deferred = Object.keys(unprocessed)
      if (deferred.length) {
        throttled(api, mainKey, `${deferred.map((t) => `${unprocessed[t].length} requests on ${t}`).join(', ')} past the write units`)
      }
      if (!Object.keys(send.RequestItems).length) return ddbThrottle(res, api, deferred[0], 'write', now)
    } else {
      const over = tables.filter((t) => unitsWin(kind, t).sum(now) >= unitsLimit(kind))
      if (tables.length && over.length === tables.length) return ddbThrottle(res, api, over[0], kind, now)
    }
    admitted(api, mainKey, now)
    const r = await forwardP(up, req, Buffer.from(JSON.stringify(send)))
    const done = Date.now()
    let out
    try {
      out = JSON.parse(r.body.toString('utf8'))
    } catch (e) {
      return reply(res, r.status, r.headers, r.body)
    }
    if (r.status !== 200) {
      // A write refused by its condition still uses a write unit.
      if (kind === 'write' && /ConditionalCheckFailed/.test(String(out.__type || ''))) chargeUnits(api, mainKey, 'write', 1, done)
      return reply(res, r.status, r.headers, r.body)
    }
    let consumed = consumedByTable(out.ConsumedCapacity)
    if ((op === 'Scan' || op === 'Query') && Array.isArray(out.Items)) {
      const sizes = out.Items.map(ddbItemSize)
      const total = sizes.reduce((a, b) => a + b, 0)
      if (total > limit.ddbPageBytes && out.Items.length > 1) {
        let keep = 0
        let kept = 0
        while (keep < sizes.length && (keep === 0 || kept + sizes[keep] <= limit.ddbPageBytes)) kept += sizes[keep++]
        const ks = await keySchema(tables[0])
        const names = new Set([...ks.table, ...(data.IndexName ? ks.indexes[data.IndexName] || [] : [])])
        const last = out.Items[keep - 1]
        const lek = {}
        for (const n of names) if (last[n]) lek[n] = last[n]
        out.Items = out.Items.slice(0, keep)
        out.Count = keep
        out.ScannedCount = keep
        out.LastEvaluatedKey = lek
        const units = Math.ceil(kept / (4 * KiB)) * (data.ConsistentRead ? 1 : 0.5)
        consumed = new Map([[tables[0], units]])
        if (askedCapacity && out.ConsumedCapacity) out.ConsumedCapacity.CapacityUnits = units
        measure(api, mainKey, 'cutPages', done, 1)
      }
      measure(api, mainKey, 'pageBytes', done, Math.min(total, limit.ddbPageBytes))
    }
    for (const [t, units] of consumed) chargeUnits(api, t, kind, units, done)
    if (unprocessed && Object.keys(unprocessed).length) {
      out.UnprocessedItems = {...(out.UnprocessedItems || {})}
      for (const [t, list] of Object.entries(unprocessed)) out.UnprocessedItems[t] = [...(out.UnprocessedItems[t] || []), ...list]
    }
    if (!askedCapacity) delete out.ConsumedCapacity
    return replyJson(res, 'dynamodb', 200, r.headers, out)
  }

  // ---- servers
  function admin(req, res) {
    const send = (status, obj) => {
      const body = Buffer.from(JSON.stringify(obj, null, 1) + '\n')
      res.writeHead(status, {'content-type': 'application/json', 'content-length': body.length})
      res.end(body)
    }
    if (req.method === 'GET' && req.url === '/__limits/stats') return send(200, stats())
    if (req.method === 'GET' && req.url === '/__limits/limits') return send(200, {scale, limits: limit, sources: LIMITS})
    if (req.method === 'POST' && req.url === '/__limits/reset') {
      reset()
      return send(200, {reset: true})
    }
    return send(404, {error: `no ${req.method} ${req.url}: use GET /__limits/stats, GET /__limits/limits, POST /__limits/reset`})
  }

  function makeServer(service, upstream) {
    const up = new URL(upstream)
    const {server, sockets} = proxyHttp.bufferingServer((req, res, raw) => {
      if (req.url.startsWith('/__limits/')) return admin(req, res)
      const op = String(req.headers['x-amz-target'] || '').split('.').pop() || '?'
      const now = Date.now()
      let data = null
      try {
        data = JSON.parse(raw.toString('utf8') || '{}')
      } catch (e) {
        data = null
      }
      const run = data === null || typeof data !== 'object'
        ? forwardP(up, req, raw).then((r) => {
          arrive(service + '.' + op, 'unparsed', now)
          reply(res, r.status, r.headers, r.body)
        })
        : service === 'kinesis' ? kinesisCall(op, data, up, req, res, raw, now) : dynamoCall(op, data, up, req, res, raw, now)
      Promise.resolve(run).catch((e) => {
        log(`limits proxy: ${service}.${op} failed: ${e && e.message}`)
        // The emulator went away or answered something unexpected: the client sees a
        // dropped connection, as it would from a broken upstream.
        res.destroy()
      })
    })
    return {service, server, sockets, port: 0}
  }

  const servers = []
  if (upstreams.kinesis) servers.push(makeServer('kinesis', upstreams.kinesis))
  if (upstreams.dynamodb) servers.push(makeServer('dynamodb', upstreams.dynamodb))
  if (!servers.length) throw new Error('limits proxy: no upstream given (kinesis and/or dynamodb)')
  const ports = opts.ports || {}
  for (const s of servers) {
    await new Promise((resolve, reject) => {
      s.server.once('error', reject)
      s.server.listen(ports[s.service] || 0, '127.0.0.1', () => {
        s.server.removeListener('error', reject)
        s.port = s.server.address().port
        resolve()
      })
    })
  }
  const urls = {}
  for (const s of servers) urls[s.service] = 'http://127.0.0.1:' + s.port
  urls.stats = urls[servers[0].service] + '/__limits/stats'

  return {
    urls,
    limits: limit,
    stats,
    reset,
    close() {
      for (const s of servers) {
        s.server.close()
        for (const sock of s.sockets) sock.destroy()
      }
      agent.destroy()
    },
  }
}

// The limits table as Markdown (docs/limits.md is this output).
function limitsMarkdown() {
  const fmt = (v) => (v >= MiB && v % MiB === 0 ? `${v / MiB} MiB` : v >= KiB && v % KiB === 0 && v < MiB ? `${v / KiB} KiB` : String(v))
  const lines = [
    '| limit (proxy name) | AWS figure | counted per | past it, the proxy answers | source |',
    '|---|---|---|---|---|',
  ]
  for (const [name, l] of Object.entries(LIMITS)) {
    lines.push(`| ${l.what} (\`${name}\`) | ${fmt(l.value)}${l.rate ? ' a second' : ''} | ${l.per} | ${l.error} | ${l.source} |`)
  }
  return lines.join('\n') + '\n'
}

module.exports = {startLimitsProxy, LIMITS, limitsMarkdown, ddbItemSize}

if (require.main === module) {
  const args = process.argv.slice(2)
  const fail = (msg) => {
    process.stderr.write('limits_proxy.js: ' + msg + '\n')
    process.exit(2)
  }
  const o = {kinesis: null, dynamodb: null, ports: {}, scale: 1, limits: {}, statsOut: null, ignoreStdin: false}
  for (let i = 0; i < args.length; i++) {
    const a = args[i]
    const v = () => {
      if (i + 1 >= args.length) fail('missing value after ' + a)
      return args[++i]
    }
    if (a === '--kinesis') o.kinesis = v()
    else if (a === '--dynamodb') o.dynamodb = v()
    else if (a === '--kinesis-port') o.ports.kinesis = Number(v())
    else if (a === '--dynamodb-port') o.ports.dynamodb = Number(v())
    else if (a === '--scale') o.scale = Number(v())
    else if (a === '--limit') {
      const m = /^([A-Za-z]+)=(.+)$/.exec(v())
      if (!m) fail('--limit takes NAME=VALUE')
      o.limits[m[1]] = Number(m[2])
    } else if (a === '--stats-out') o.statsOut = v()
    else if (a === '--ignore-stdin') o.ignoreStdin = true
    else if (a === '--print-limits') {
      process.stdout.write(limitsMarkdown())
      process.exit(0)
    } else if (a === '-h' || a === '--help') {
      process.stdout.write('usage: node limits_proxy.js --kinesis URL --dynamodb URL [--kinesis-port N] [--dynamodb-port N]\n' +
        '         [--scale F] [--limit NAME=VALUE]... [--stats-out FILE] [--ignore-stdin]\n' +
        '       node limits_proxy.js --print-limits\n' +
        'limits: ' + Object.keys(LIMITS).join(', ') + '\n')
      process.exit(0)
    } else fail('unknown argument: ' + a)
  }
  if (!o.kinesis && !o.dynamodb) fail('give --kinesis URL and/or --dynamodb URL (the emulators)')
  startLimitsProxy({kinesis: o.kinesis, dynamodb: o.dynamodb}, {ports: o.ports, scale: o.scale, limits: o.limits,
    log: process.env.KCL_LIMITS_LOG ? (l) => process.stderr.write(l + '\n') : null})
    .then((proxy) => {
      process.stdout.on('error', () => {})
      process.stdout.write(JSON.stringify(proxy.urls) + '\n')
      let stopping = false
      const bye = () => {
        if (stopping) return
        stopping = true
        if (o.statsOut) {
          try {
            fs.writeFileSync(o.statsOut, JSON.stringify(proxy.stats(), null, 1) + '\n')
          } catch (e) {
            process.stderr.write(`limits_proxy.js: cannot write ${o.statsOut}: ${e.message}\n`)
          }
        }
        proxy.close()
        process.exit(0)
      }
      if (!o.ignoreStdin) {
        process.stdin.on('end', bye)
        process.stdin.on('close', bye)
        process.stdin.on('error', bye)
        process.stdin.on('data', () => {})
        process.stdin.resume()
      }
      process.on('SIGTERM', bye)
      process.on('SIGINT', bye)
      process.on('SIGHUP', bye)
    })
    .catch((e) => fail(e && e.message ? e.message : String(e)))
}
