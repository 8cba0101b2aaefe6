// Tests of the limits proxy (limits_proxy.js) against real kinesalite and dynalite:
//   node --test tools/scenario/limits_proxy_test.js
// Starts the emulators (tools/emulators/serve.js) and the proxy as processes of their own on
// loopback, drives them with unsigned JSON calls and checks that each limit is enforced with
// the answer AWS gives, and that the stats endpoint reports the peaks it saw.
'use strict'

const {test, before, after} = require('node:test')
const assert = require('node:assert/strict')
const {spawn} = require('child_process')
const http = require('http')
const path = require('path')
const fs = require('fs')
const aws = require('./lib/aws')
const {ddbItemSize, limitsMarkdown} = require('./limits_proxy')

const repo = path.resolve(__dirname, '..', '..')
const children = []

// Starts a node script that prints one JSON line of URLs when ready.
function startJsonLine(script, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], {stdio: ['pipe', 'pipe', 'inherit']})
    children.push(child)
    let buf = ''
    const timer = setTimeout(() => reject(new Error(`${path.basename(script)} did not start within 30 s`)), 30000)
    child.stdout.on('data', (d) => {
      buf += d
      const nl = buf.indexOf('\n')
      if (nl >= 0) {
        clearTimeout(timer)
        resolve({child, urls: JSON.parse(buf.slice(0, nl))})
      }
    })
    child.on('exit', (code) => reject(new Error(`${path.basename(script)} exited with ${code} before it was ready`)))
  })
}
const startProxy = (emu, extra = []) =>
  startJsonLine(path.join(__dirname, 'limits_proxy.js'), ['--kinesis', emu.kinesis, '--dynamodb', emu.dynamodb, ...extra])

// One call; never throws for an HTTP error: resolves {status, headers, body}.
function raw(endpoint, service, op, body) {
  const u = new URL(endpoint)
  const payload = Buffer.from(JSON.stringify(body))
  const target = service === 'kinesis' ? 'Kinesis_20131202.' + op : 'DynamoDB_20120810.' + op
  return new Promise((resolve, reject) => {
    const req = http.request({host: u.hostname, port: u.port, method: 'POST', path: '/', agent: aws.agent,
      headers: {'Content-Type': 'application/x-amz-json-' + (service === 'kinesis' ? '1.1' : '1.0'),
        'X-Amz-Target': target, 'Content-Length': payload.length, 'X-Amz-Date': '20240101T000000Z',
        Authorization: 'AWS4-HMAC-SHA256 Credential=AKIDTEST/20240101/us-east-1/svc/aws4_request, SignedHeaders=host, Signature=0'}},
    (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString()
        resolve({status: res.statusCode, headers: res.headers, body: text ? JSON.parse(text) : {}, raw: Buffer.concat(chunks)})
      })
    })
    req.on('error', reject)
    req.end(payload)
  })
}
function getJson(url, method = 'GET') {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {method}, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString())))
    })
    req.on('error', reject)
    req.end()
  })
}

let emu  // emulator URLs
let proxy  // {child, urls}
const STREAM = 'limits-test'
const SHARD0 = 'shardId-000000000000'
const SHARD1 = 'shardId-000000000001'
let ranges  // shard id -> StartingHashKey

before(async () => {
  emu = (await startJsonLine(path.join(repo, 'tools', 'emulators', 'serve.js'), [])).urls
  proxy = await startProxy(emu)
  await aws.kinesis(emu.kinesis, 'CreateStream', {StreamName: STREAM, ShardCount: 2})
  for (let i = 0; i < 100; i++) {
    const d = await aws.kinesis(emu.kinesis, 'DescribeStreamSummary', {StreamName: STREAM})
    if (d.StreamDescriptionSummary.StreamStatus === 'ACTIVE') break
    await new Promise((r) => setTimeout(r, 50))
  }
  const shards = (await aws.kinesis(emu.kinesis, 'ListShards', {StreamName: STREAM})).Shards
  ranges = Object.fromEntries(shards.map((s) => [s.ShardId, s.HashKeyRange.StartingHashKey]))
  for (const t of ['limits-scan', 'limits-batch-a', 'limits-batch-b', 'limits-units']) {
    await aws.dynamodb(emu.dynamodb, 'CreateTable', {TableName: t, BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{AttributeName: 'k', KeyType: 'HASH'}], AttributeDefinitions: [{AttributeName: 'k', AttributeType: 'S'}]})
  }
})

after(() => {
  for (const c of children) {
    try {
      c.stdin.end()
      c.kill('SIGTERM')
    } catch (e) {
      // gone already
    }
  }
  aws.agent.destroy()
})

const k = () => proxy.urls.kinesis
const d = () => proxy.urls.dynamodb
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
let putCalls = 0  // PutRecords calls sent through the main proxy
const putRecords = (body) => {
  putCalls++
  return raw(k(), 'kinesis', 'PutRecords', body)
}

// A per-second limit can only be judged when the calls fitted in one second. attempt(n)
// makes its calls and returns false when they took too long (a loaded machine: the window
// slid), true after its assertions passed; a slow attempt is tried again once its window has
// passed. Slowness only ever lets more calls through, so a quick attempt must show the limit.
async function inOneSecond(what, attempt) {
  for (let n = 0; n < 4; n++) {
    if (await attempt(n)) return
    await sleep(1100)
  }
  assert.fail(`${what}: four attempts each took over a second; the machine is too loaded to judge a per-second limit`)
}

test('six GetRecords on one shard within a second: the sixth is throttled as AWS does', async () => {
  let iterator = null
  await inOneSecond('GetRecords', async () => {
    const it = await raw(k(), 'kinesis', 'GetShardIterator', {StreamName: STREAM, ShardId: SHARD0, ShardIteratorType: 'TRIM_HORIZON'})
    assert.equal(it.status, 200)
    iterator = it.body.ShardIterator
    const t0 = Date.now()
    const answers = []
    for (let i = 0; i < 6; i++) {
      const r = await raw(k(), 'kinesis', 'GetRecords', {ShardIterator: iterator})
      answers.push(r)
      if (r.status === 200) iterator = r.body.NextShardIterator
    }
    if (Date.now() - t0 >= 950) return false
    assert.deepEqual(answers.map((a) => a.status), [200, 200, 200, 200, 200, 400])
    const last = answers[5]
    assert.equal(last.body.__type, 'ProvisionedThroughputExceededException')
    assert.equal(last.headers['x-amzn-errortype'], 'ProvisionedThroughputExceededException')
    assert.match(last.body.message, /Rate exceeded for shard shardId-000000000000 in stream limits-test under account \d{12}\./)
    return true
  })
  // The other shard is not affected.
  const other = await raw(k(), 'kinesis', 'GetShardIterator', {StreamName: STREAM, ShardId: SHARD1, ShardIteratorType: 'LATEST'})
  assert.equal(other.status, 200)
  assert.equal((await raw(k(), 'kinesis', 'GetRecords', {ShardIterator: other.body.ShardIterator})).status, 200)
  // A second later the shard serves again.
  await sleep(1050)
  assert.equal((await raw(k(), 'kinesis', 'GetRecords', {ShardIterator: iterator})).status, 200)
})

test('GetShardIterator: five a second per shard, the sixth throttled', async () => {
  await sleep(1050)  // the previous test asked one of shard 1
  await inOneSecond('GetShardIterator', async () => {
    const t0 = Date.now()
    const statuses = []
    for (let i = 0; i < 6; i++) {
      statuses.push((await raw(k(), 'kinesis', 'GetShardIterator', {StreamName: STREAM, ShardId: SHARD1,
        ShardIteratorType: 'TRIM_HORIZON'})).status)
    }
    if (Date.now() - t0 >= 950) return false
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 400])
    return true
  })
})

test('PutRecords past 1,000 records a second on a shard: per-record throttles, nothing written for them', async () => {
  const batch = (n, shard, tag) => Array.from({length: n}, (_, i) => ({
    PartitionKey: `${tag}-${i}`, ExplicitHashKey: ranges[shard], Data: Buffer.from(`rec ${tag} ${i}`).toString('base64')}))
  await inOneSecond('PutRecords records', async (n) => {
    // Three calls of 500 records for shard 0 at once (the proxy admits each as it arrives),
    // then a call with records for both shards.
    const t0 = Date.now()
    const burst = await Promise.all([0, 1, 2].map((c) => putRecords({StreamName: STREAM, Records: batch(500, SHARD0, `a${n}c${c}`)})))
    const mixed = await putRecords({StreamName: STREAM, Records: [...batch(2, SHARD0, `a${n}m0`), ...batch(2, SHARD1, `a${n}m1`)]})
    if (Date.now() - t0 >= 950) return false
    assert.deepEqual(burst.map((a) => a.status), [200, 200, 200])
    assert.deepEqual(burst.map((a) => a.body.FailedRecordCount).sort(), [0, 0, 500])
    for (const r of burst.find((a) => a.body.FailedRecordCount === 500).body.Records) {
      assert.equal(r.ErrorCode, 'ProvisionedThroughputExceededException')
      assert.match(r.ErrorMessage, /Rate exceeded for shard shardId-000000000000 in stream limits-test under account \d{12}\./)
      assert.equal(r.SequenceNumber, undefined)
    }
    // Records for the throttled shard fail, the others pass, each in its place.
    assert.equal(mixed.status, 200)
    assert.equal(mixed.body.FailedRecordCount, 2)
    assert.deepEqual(mixed.body.Records.map((r) => r.ErrorCode || r.ShardId),
      ['ProvisionedThroughputExceededException', 'ProvisionedThroughputExceededException', SHARD1, SHARD1])
    // The emulator holds the 1,000 admitted records of the burst only (read straight from it).
    const it = await aws.kinesis(emu.kinesis, 'GetShardIterator', {StreamName: STREAM, ShardId: SHARD0, ShardIteratorType: 'TRIM_HORIZON'})
    const got = await aws.kinesis(emu.kinesis, 'GetRecords', {ShardIterator: it.ShardIterator})
    const mine = new RegExp(`^rec a${n}`)
    assert.equal(got.Records.filter((r) => mine.test(Buffer.from(r.Data, 'base64').toString())).length, 1000)
    return true
  })
})

test('PutRecords past 1 MiB a second on a shard (partition-key hashing): the bytes limit throttles', async () => {
  const big = Buffer.alloc(400 * 1024, 7).toString('base64')
  // Partition keys whose MD5 falls in shard 1's half of the hash space.
  const crypto = require('crypto')
  const keys = []
  for (let i = 0; keys.length < 4; i++) {
    const h = BigInt('0x' + crypto.createHash('md5').update('pk' + i).digest('hex'))
    if (h >= BigInt(ranges[SHARD1])) keys.push('pk' + i)
  }
  await sleep(1050)  // the previous test wrote to shard 1
  await inOneSecond('PutRecords bytes', async () => {
    const t0 = Date.now()
    const a = await putRecords({StreamName: STREAM, Records: keys.slice(0, 2).map((pk) => ({PartitionKey: pk, Data: big}))})
    const b = await putRecords({StreamName: STREAM, Records: keys.slice(2, 4).map((pk) => ({PartitionKey: pk, Data: big}))})
    // PutRecord (one record) is refused as a whole.
    const one = await raw(k(), 'kinesis', 'PutRecord', {StreamName: STREAM, PartitionKey: keys[0], Data: big})
    if (Date.now() - t0 >= 950) return false
    assert.equal(a.body.FailedRecordCount, 0)
    assert.deepEqual(a.body.Records.map((r) => r.ShardId), [SHARD1, SHARD1])
    assert.equal(b.body.FailedRecordCount, 2)
    assert.equal(one.status, 400)
    assert.equal(one.body.__type, 'ProvisionedThroughputExceededException')
    return true
  })
})

// Creates a one-shard stream straight on the emulator and writes n records of `bytes` bytes.
async function bigStream(stream, n, bytes) {
  await aws.kinesis(emu.kinesis, 'CreateStream', {StreamName: stream, ShardCount: 1})
  for (let i = 0; i < 100; i++) {
    const s = await aws.kinesis(emu.kinesis, 'DescribeStreamSummary', {StreamName: stream})
    if (s.StreamDescriptionSummary.StreamStatus === 'ACTIVE') break
    await sleep(50)
  }
  const data = Buffer.alloc(bytes, 1).toString('base64')
  for (let i = 0; i < n; i++) await aws.kinesis(emu.kinesis, 'PutRecord', {StreamName: stream, PartitionKey: 'p' + i, Data: data})
}

test('a GetRecords answer over 10 MiB is cut at 10 MiB; the next iterator goes on after it', async () => {
  await bigStream('limits-big', 11, 1000 * 1000)
  const it = await raw(k(), 'kinesis', 'GetShardIterator', {StreamName: 'limits-big', ShardId: SHARD0, ShardIteratorType: 'TRIM_HORIZON'})
  const first = await raw(k(), 'kinesis', 'GetRecords', {ShardIterator: it.body.ShardIterator})
  assert.equal(first.status, 200)
  assert.equal(first.body.Records.length, 10, '10 records of 1,000,000 bytes fit in 10 MiB, the 11th does not')
  // The rest, once the shard serves again (a 10 MiB answer refuses its reads for 4-5 s).
  let rest
  for (let i = 0; i < 40; i++) {
    rest = await raw(k(), 'kinesis', 'GetRecords', {ShardIterator: first.body.NextShardIterator})
    if (rest.status === 200) break
    assert.equal(rest.body.__type, 'ProvisionedThroughputExceededException')
    await sleep(250)
  }
  assert.equal(rest.status, 200)
  assert.deepEqual(rest.body.Records.map((r) => r.PartitionKey), ['p10'])
})

test('after a large GetRecords answer the shard refuses reads for answer/rate seconds', async () => {
  // The 2 MiB/s rule with smaller figures (1 MiB answers, 200 KB/s), so that moving the
  // answer does not take long: 1,000,000 bytes from a full one-second bucket refuse the
  // shard's reads for 5 - 1 = 4 s.
  const scaled = await startProxy(emu, ['--limit', 'getRecordsMaxBytes=1048576', '--limit', 'getRecordsBytesPerShard=200000'])
  await bigStream('limits-debt', 11, 100 * 1000)
  const it = await raw(scaled.urls.kinesis, 'kinesis', 'GetShardIterator', {StreamName: 'limits-debt', ShardId: SHARD0, ShardIteratorType: 'TRIM_HORIZON'})
  const sent = Date.now()
  const first = await raw(scaled.urls.kinesis, 'kinesis', 'GetRecords', {ShardIterator: it.body.ShardIterator})
  const received = Date.now()
  assert.equal(first.status, 200)
  assert.equal(first.body.Records.length, 10, '10 records of 100,000 bytes fit in 1 MiB, the 11th does not')
  let ok = null
  let refused = 0
  let lastRefusedStart = null
  while (ok === null && Date.now() - sent < 10000) {
    const started = Date.now()
    const r = await raw(scaled.urls.kinesis, 'kinesis', 'GetRecords', {ShardIterator: first.body.NextShardIterator})
    if (r.status === 200) ok = Date.now()
    else {
      assert.equal(r.body.__type, 'ProvisionedThroughputExceededException')
      refused++
      lastRefusedStart = started
      await sleep(100)
    }
  }
  assert.ok(ok !== null, 'the shard never served again')
  // Refused from the answer (at most `received`) until at least 4 s after it (at least `sent`).
  assert.ok(ok - received >= 4000 - (received - sent) - 150, `served again ${ok - received} ms after the answer arrived`)
  // And not longer: the proxy judged each refused call after it started, and the debt began
  // before `received`, so no refused call started more than 4 s after `received`. (Bounded by
  // when calls started, not when the next one was served: a slow host delays the calls, not
  // the rule.)
  assert.ok(lastRefusedStart - received <= 4000 + 100, `a call started ${lastRefusedStart - received} ms after the answer was still refused`)
  assert.ok(refused >= 10)
  scaled.child.stdin.end()
})

test('DescribeStreamSummary 21 times in a second: LimitExceededException (400) for the 21st', async () => {
  await inOneSecond('DescribeStreamSummary', async () => {
    const statuses = []
    let lastBody = null
    const t0 = Date.now()
    for (let i = 0; i < 21; i++) {
      const r = await raw(k(), 'kinesis', 'DescribeStreamSummary', {StreamName: STREAM})
      statuses.push(r.status)
      lastBody = r.body
    }
    if (Date.now() - t0 >= 950) return false
    assert.deepEqual(statuses, [...Array(20).fill(200), 400])
    assert.equal(lastBody.__type, 'LimitExceededException')
    return true
  })
})

test('Scan of a table over 1 MB comes in pages of at most 1 MB, LastEvaluatedKey between them', async () => {
  const blob = 'x'.repeat(60 * 1024)
  for (let i = 0; i < 30; i += 10) {
    const items = Array.from({length: 10}, (_, j) => ({PutRequest: {Item: {k: {S: 'item' + (i + j)}, v: {S: blob}}}}))
    await aws.dynamodb(emu.dynamodb, 'BatchWriteItem', {RequestItems: {'limits-scan': items}})
  }
  const pages = async (endpoint) => {
    const seen = []
    const sizes = []
    let start
    do {
      const r = await raw(endpoint, 'dynamodb', 'Scan', {TableName: 'limits-scan', ...(start ? {ExclusiveStartKey: start} : {})})
      assert.equal(r.status, 200)
      assert.equal(r.body.ConsumedCapacity, undefined, 'capacity the caller did not ask for is not in the answer')
      assert.equal(r.headers['x-amz-crc32'], String(require('zlib').crc32(r.raw)), 'the CRC32 of the rewritten answer')
      sizes.push(r.body.Items.reduce((a, it) => a + ddbItemSize(it), 0))
      for (const it of r.body.Items) seen.push(it.k.S)
      start = r.body.LastEvaluatedKey
    } while (start)
    return {seen, sizes}
  }
  const full = await pages(d())
  assert.equal(full.seen.length, 30)
  assert.equal(new Set(full.seen).size, 30)
  assert.ok(full.sizes.length >= 2, 'a table of ~1.8 MB takes at least two pages')
  for (const s of full.sizes) assert.ok(s <= 1024 * 1024, `page of ${s} bytes is over 1 MB`)
  // The proxy's own cut (the emulator pages at 1 MB too): a proxy with 256 KB pages.
  const small = await startProxy(emu, ['--limit', 'ddbPageBytes=262144'])
  const cut = await pages(small.urls.dynamodb)
  assert.deepEqual([...cut.seen].sort(), [...full.seen].sort())
  assert.ok(cut.sizes.length >= 8, `${cut.sizes.length} pages of at most 256 KB`)
  for (const s of cut.sizes) assert.ok(s <= 262144, `page of ${s} bytes is over 256 KB`)
  const st = await getJson(small.urls.stats)
  assert.ok(st.apis['dynamodb.Scan'].keys['limits-scan'].cutPages.total >= 1)
  small.child.stdin.end()
})

test('BatchWriteItem of 26 requests is refused; 25 are taken', async () => {
  const req = (t, n, tag) => Array.from({length: n}, (_, i) => ({PutRequest: {Item: {k: {S: `${tag}${i}`}}}}))
  // 13 + 13 over two tables: the emulator alone would take it (it checks 25 per table).
  const r = await raw(d(), 'dynamodb', 'BatchWriteItem', {RequestItems: {'limits-batch-a': req('a', 13, 'a'), 'limits-batch-b': req('b', 13, 'b')}})
  assert.equal(r.status, 400)
  assert.equal(r.body.__type, 'com.amazonaws.dynamodb.v20120810#ValidationException')
  assert.equal(r.body.message, 'Too many items requested for the BatchWriteItem call')
  assert.equal((await aws.scanAll(emu.dynamodb, 'limits-batch-a')).length, 0, 'nothing of the refused call was written')
  const ok = await raw(d(), 'dynamodb', 'BatchWriteItem', {RequestItems: {'limits-batch-a': req('a', 12, 'a'), 'limits-batch-b': req('b', 13, 'b')}})
  assert.equal(ok.status, 200)
  assert.deepEqual(ok.body.UnprocessedItems, {})
  // An item over 400 KB.
  const big = await raw(d(), 'dynamodb', 'PutItem', {TableName: 'limits-batch-a', Item: {k: {S: 'big'}, v: {S: 'y'.repeat(401 * 1024)}}})
  assert.equal(big.status, 400)
  assert.equal(big.body.__type, 'com.amazonaws.dynamodb.v20120810#ValidationException')
})

test('DynamoDB past 1,000 write units a second on a table: unprocessed items, then ProvisionedThroughputExceededException', async () => {
  const blob = 'z'.repeat(50 * 1024)  // ~50 write units each
  await inOneSecond('write units', async (n) => {
    const items = Array.from({length: 25}, (_, i) => ({PutRequest: {Item: {k: {S: `u${n}-${i}`}, v: {S: blob}}}}))
    const t0 = Date.now()
    const r = await raw(d(), 'dynamodb', 'BatchWriteItem', {RequestItems: {'limits-units': items}})
    const put = await raw(d(), 'dynamodb', 'PutItem', {TableName: 'limits-units', Item: {k: {S: 'one'}}})
    if (Date.now() - t0 >= 950) return false
    assert.equal(r.status, 200)
    const unprocessed = (r.body.UnprocessedItems['limits-units'] || []).length
    assert.ok(unprocessed >= 4 && unprocessed <= 6, `${unprocessed} requests left unprocessed (1,000 units admit 20-21 of 25)`)
    assert.equal(put.status, 400)
    assert.equal(put.body.__type, 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException')
    assert.equal(put.body.ThrottlingReasons[0].reason, 'TableWriteKeyRangeThroughputExceeded')
    assert.ok(put.headers['x-amz-crc32'], 'DynamoDB answers carry a CRC32')
    return true
  })
  // Reads of the table are not affected by its writes.
  assert.equal((await raw(d(), 'dynamodb', 'GetItem', {TableName: 'limits-units', Key: {k: {S: 'one'}}})).status, 200)
})

test('the stats endpoint reports calls, throttles and peak rates by API and key', async () => {
  const st = await getJson(proxy.urls.stats)
  const gr = st.apis['kinesis.GetRecords'].keys[`${STREAM}/${SHARD0}`]
  assert.ok(gr.peakPerSecond >= 6, `GetRecords peak ${gr.peakPerSecond}`)
  assert.equal(gr.peakAdmittedPerSecond, 5)
  assert.ok(gr.throttled >= 1)
  const dss = st.apis['kinesis.DescribeStreamSummary']
  assert.ok(dss.keys.account.peakPerSecond >= 21)
  assert.equal(dss.keys.account.peakAdmittedPerSecond, 20)
  assert.ok(dss.throttled >= 1)
  assert.equal(st.apis['kinesis.PutRecords'].calls, putCalls, 'each PutRecords call once, however many shards it touched')
  const put = st.apis['kinesis.PutRecords'].keys[`${STREAM}/${SHARD0}`]
  assert.equal(put.records.peakPerSecond, 1000)
  assert.ok(put.throttledRecords.total >= 500)
  assert.ok(st.apis['dynamodb.BatchWriteItem'].keys['limits-units'].writeUnits.peakPerSecond <= 1000 + 51)
  assert.ok(st.throttles >= 5)
  assert.equal(st.limits.getRecordsCallsPerShard, 5)
  // Reset clears the counters.
  await getJson(proxy.urls.kinesis + '/__limits/reset', 'POST')
  const after = await getJson(proxy.urls.stats)
  assert.equal(after.throttles, 0)
  assert.deepEqual(after.apis, {})
})

test('docs/limits.md holds the limits table the proxy enforces', () => {
  const doc = fs.readFileSync(path.join(repo, 'docs', 'limits.md'), 'utf8')
  assert.ok(doc.includes(limitsMarkdown()), 'docs/limits.md is out of date: paste `node tools/scenario/limits_proxy.js --print-limits`')
})
