#!/usr/bin/env node
// Lease assignment as users see it: `kcl consume` workers on kinesalite and dynalite, with a
// trickle of records, measured from outside. Prints, for each --assignment mode (leader, the
// default, and worker-takes, the Java KCL 2.x's way, in the same run):
//
//  join       a second worker joins a fleet of one on an 8-shard stream: seconds from its start
//             until both hold 4 leases (the table shows it and no handoff is pending), the
//             owner changes in the minute after (want 0), and records printed twice by the two
//             workers (want 0: planned moves are handoffs)
//  takeover   the second worker is SIGKILLed: seconds until the survivor has taken every
//             lease (its "lease ... taken" log lines), with failover 10 s
//             (with --streams N, join and takeover run on N streams of 8 / N shards read as
//             one multi-stream application, and again on one stream of 8, in the same run)
//  steady     12 workers on a 24-shard stream once balanced, over --steady-s seconds, counted
//             at a proxy in front of dynalite (both tables): DynamoDB items read and writes per
//             shard per minute, and the capacity units DynamoDB bills (each answer's
//             ConsumedCapacity, which kcl-cpp asks for; a write refused by its condition counts
//             one unit) per shard per minute, split into coordination (everything but
//             checkpoints) and checkpoints (UpdateItems that write the checkpoint attribute,
//             every 5 s by default), with the on-demand price per shard-month
//             ($0.125 per million read units, $0.625 per million write units). dynalite's
//             ConsumedCapacity leaves out the leaseOwner index's writes (KEYS_ONLY: one only
//             when a lease changes owner, rare in the steady window); bench_lease_simulation
//             counts them
//
//   node bench/lease_assignment_e2e.js [--build-dir build/release] [--modes leader,worker-takes]
//                                      [--steady-s 60] [--skip-steady] [--streams N] [--http]
//   --http: the steady fleet's workers serve their HTTP endpoint (/metrics, /status), as
//           production fleets do; it must add no DynamoDB call while nobody looks at it
'use strict'

const {spawn} = require('child_process')
const http = require('http')
const path = require('path')
const readline = require('readline')
const aws = require('../tools/scenario/lib/aws')

const ROOT = path.dirname(__dirname)

function parseArgs(argv) {
  const o = {buildDir: path.join(ROOT, 'build', 'release'), modes: ['leader', 'worker-takes'],
             steadyS: 60, skipSteady: false, streams: 1}
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--build-dir') o.buildDir = path.resolve(argv[++i])
    else if (a === '--modes') o.modes = argv[++i].split(',')
    else if (a === '--steady-s') o.steadyS = Number(argv[++i])
    else if (a === '--skip-steady') o.skipSteady = true
    else if (a === '--http') o.http = true
    else if (a === '--streams' && [1, 2, 4, 8].includes(Number(argv[i + 1]))) o.streams = Number(argv[++i])
    else {
      process.stderr.write('usage: lease_assignment_e2e.js [--build-dir D] [--modes leader,worker-takes] [--steady-s S] [--skip-steady] [--streams 1|2|4|8] [--http]\n')
      process.exit(2)
    }
  }
  return o
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const READ_UNIT_USD = 0.125 / 1e6
const WRITE_UNIT_USD = 0.625 / 1e6
const MINUTES_PER_MONTH = 730 * 60

// A write of the checkpoint attribute (a checkpoint, or the final one of a handoff).
function isCheckpoint(op, j) {
  return op === 'UpdateItem' && Object.values(j.ExpressionAttributeNames || {}).includes('checkpoint')
}

// A proxy in front of dynalite that counts, per table, items read (GetItem: 1 when found;
// Scan/Query: Count; BatchGetItem: items returned) and write requests, and per category
// (coordination, checkpoint) the read and write units billed.
function startCountingProxy(upstream) {
  const up = new URL(upstream)
  const counts = {}
  const agent = new http.Agent({keepAlive: true, maxSockets: 256})
  const bump = (table, key, n) => {
    counts[table] = counts[table] || {reads: 0, writes: 0, requests: 0, rcu: 0, wcu: 0, ckptRcu: 0, ckptWcu: 0}
    counts[table][key] += n
  }
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      const op = String(req.headers['x-amz-target'] || '').split('.').pop()
      let table = '?'
      let checkpoint = false
      let consistent = ''
      try {
        const j = JSON.parse(body.toString() || '{}')
        table = j.TableName || Object.keys(j.RequestItems || {})[0] || '?'
        checkpoint = isCheckpoint(op, j)
        if (j.ConsistentRead) consistent = ' consistent'
      } catch (e) {}
      const isWrite = ['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem'].includes(op)
      const upReq = http.request({host: up.hostname, port: up.port, method: req.method, path: req.url,
                                  headers: req.headers, agent}, (upRes) => {
        const out = []
        upRes.on('data', (c) => out.push(c))
        upRes.on('end', () => {
          const text = Buffer.concat(out)
          bump(table, 'requests', 1)
          if (isWrite) bump(table, 'writes', 1)
          const unitKey = checkpoint ? (isWrite ? 'ckptWcu' : 'ckptRcu') : (isWrite ? 'wcu' : 'rcu')
          const units = (n) => {
            bump(table, unitKey, n)
            const detail = `${table} ${op}${consistent}${checkpoint ? ' (checkpoint)' : ''}`
            bump(detail, 'requests', 1)
            bump(detail, isWrite ? 'wcu' : 'rcu', n)
          }
          if (upRes.statusCode !== 200 && isWrite && /ConditionalCheckFailed/.test(text.toString())) units(1)
          if (upRes.statusCode === 200) {
            try {
              const j = JSON.parse(text.toString() || '{}')
              if (j.ConsumedCapacity && typeof j.ConsumedCapacity.CapacityUnits === 'number') units(j.ConsumedCapacity.CapacityUnits)
              if (op === 'GetItem') bump(table, 'reads', j.Item ? 1 : 0)
              if (op === 'Scan' || op === 'Query') bump(table, 'reads', j.Count || 0)
              if (op === 'BatchGetItem') {
                for (const items of Object.values(j.Responses || {})) bump(table, 'reads', items.length)
              }
            } catch (e) {}
          }
          res.writeHead(upRes.statusCode, upRes.headers)
          res.end(text)
        })
      })
      upReq.on('error', () => { res.writeHead(502); res.end() })
      upReq.end(body)
    })
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    snapshot: () => JSON.parse(JSON.stringify(counts)),
    close: () => server.close(),
  })))
}

// Every worker started, so that a run that fails midway (a throw, a rejected scan) stops
// them all instead of leaving them retrying endpoints that are gone.
const started = new Set()

class ConsumeWorker {
  constructor(kcl, env, {stream, app, id, mode, http}) {
    this.id = id
    this.printed = []  // "shard seq" of every record printed
    this.taken = []    // {key, at} from "lease ... taken" log lines
    const streams = Array.isArray(stream) ? stream : [stream]
    this.proc = spawn(kcl, ['consume', ...streams.flatMap((s) => ['--stream', s]), '--app', app,
                            '--worker-id', id, '--from', 'trim-horizon', '--assignment', mode,
                            ...(http ? ['--http', '127.0.0.1:0'] : [])],
                      {env, stdio: ['ignore', 'pipe', 'pipe']})
    readline.createInterface({input: this.proc.stdout}).on('line', (line) => {
      try {
        const r = JSON.parse(line)
        this.printed.push(`${r.streamName || ''} ${r.shardId || r.shard} ${r.sequenceNumber} ${r.subSequenceNumber || 0}`)
      } catch (e) {}
    })
    readline.createInterface({input: this.proc.stderr}).on('line', (line) => {
      const m = /lease (\S+) taken/.exec(line)
      if (m) this.taken.push({key: m[1], at: Date.now()})
    })
    this.exited = new Promise((resolve) => this.proc.on('exit', resolve))
    started.add(this)
    this.exited.then(() => started.delete(this))
  }
  kill() { this.proc.kill('SIGKILL'); return this.exited }
  stop() { this.proc.kill('SIGTERM'); return this.exited }
}

async function owners(dynamo, table) {
  const items = await aws.scanAll(dynamo, table)
  const out = {}
  let pending = 0
  for (const l of items) {
    if (l.checkpointOwner) pending++
    const o = l.leaseOwner || '-'
    out[o] = (out[o] || 0) + 1
  }
  return {out, pending, items}
}

async function until(pred, timeoutMs, stepMs = 100) {
  const end = Date.now() + timeoutMs
  for (;;) {
    if (await pred()) return true
    if (Date.now() > end) return false
    await sleep(stepMs)
  }
}

function producer(kinesisUrl, stream, perSecond) {
  let running = true
  let n = 0
  const loop = (async () => {
    while (running) {
      const records = []
      for (let i = 0; i < Math.max(1, Math.round(perSecond / 10)); i++) {
        records.push({Data: Buffer.from(`rec-${n++}`).toString('base64'), PartitionKey: `k${n}`})
      }
      try { await aws.kinesis(kinesisUrl, 'PutRecords', {StreamName: stream, Records: records}) } catch (e) {}
      await sleep(100)
    }
  })()
  return {stop: async () => { running = false; await loop }, count: () => n}
}

async function createStream(kinesisUrl, stream, shards) {
  await aws.kinesis(kinesisUrl, 'CreateStream', {StreamName: stream, ShardCount: shards})
  await until(async () => {
    const d = await aws.kinesis(kinesisUrl, 'DescribeStream', {StreamName: stream})
    return d.StreamDescription.StreamStatus === 'ACTIVE'
  }, 30000, 200)
}

async function joinAndTakeover(kcl, env, urls, mode, streamCount = 1) {
  const base = `lae-${mode}-${streamCount}-${Date.now() % 100000}`
  const app = `${base}-app`
  const streams = []
  for (let i = 0; i < streamCount; i++) streams.push(streamCount === 1 ? base : `${base}-s${i}`)
  for (const s of streams) await createStream(urls.kinesis, s, 8 / streamCount)
  const producers = streams.map((s) => producer(urls.kinesis, s, 40 / streamCount))
  const prod = {stop: () => Promise.all(producers.map((p) => p.stop()))}
  const stream = streamCount === 1 ? base : streams
  const a = new ConsumeWorker(kcl, env, {stream, app, id: 'w-a', mode})
  if (!await until(async () => (await owners(urls.dynamodb, app).catch(() => ({out: {}}))).out['w-a'] === 8, 120000)) {
    throw new Error('the first worker never held all 8 leases')
  }
  await sleep(2000)
  const joined = Date.now()
  const b = new ConsumeWorker(kcl, env, {stream, app, id: 'w-b', mode})
  const balanced = await until(async () => {
    const o = await owners(urls.dynamodb, app)
    return o.out['w-a'] === 4 && o.out['w-b'] === 4 && o.pending === 0 && b.taken.length >= 4
  }, 180000)
  const joinS = balanced ? (Date.now() - joined) / 1000 : null
  // The minute after: count owner changes seen by polling.
  let flips = 0
  let last = (await owners(urls.dynamodb, app)).items.map((l) => l.leaseKey + '=' + l.leaseOwner).sort().join()
  const watchEnd = Date.now() + 60000
  while (Date.now() < watchEnd) {
    await sleep(500)
    const now = (await owners(urls.dynamodb, app)).items.map((l) => l.leaseKey + '=' + l.leaseOwner).sort().join()
    if (now !== last) flips++
    last = now
  }
  // Records printed twice by the two workers (planned moves only so far).
  const seen = new Map()
  for (const w of [a, b]) for (const r of w.printed) seen.set(r, (seen.get(r) || 0) + 1)
  let duplicates = 0
  for (const n of seen.values()) if (n > 1) duplicates += n - 1
  // Takeover after SIGKILL.
  const takenBefore = a.taken.length
  const killed = Date.now()
  await b.kill()
  const tookOver = await until(async () => a.taken.length >= takenBefore + 4, 120000, 50)
  const takeoverS = tookOver ? (a.taken[takenBefore + 3].at - killed) / 1000 : null
  await prod.stop()
  await a.stop()
  return {mode, joinS, flips, duplicates, takeoverS, printed: a.printed.length + b.printed.length}
}

async function steady(kcl, env, urls, mode, seconds, http) {
  const stream = `las-${mode}-${Date.now() % 100000}`
  const app = `${stream}-app`
  await createStream(urls.kinesis, stream, 24)
  const proxy = await startCountingProxy(urls.dynamodb)
  const wenv = Object.assign({}, env, {AWS_ENDPOINT_URL_DYNAMODB: proxy.url})
  const prod = producer(urls.kinesis, stream, 24)  // about one record per shard per second
  const workers = []
  for (let i = 0; i < 12; i++) {
    workers.push(new ConsumeWorker(kcl, wenv, {stream, app, id: `s-${i}`, mode, http}))
  }
  const ok = await until(async () => {
    const o = await owners(urls.dynamodb, app).catch(() => null)
    if (!o || o.pending) return false
    const counts = workers.map((w) => o.out[w.id] || 0)
    return counts.every((c) => c === 2)
  }, 240000, 500)
  // Past the start's activity: a worker polls at poll_interval for failover_time after it
  // joined or saw a post, then settles to its idle polls.
  await sleep(15000)
  const before = proxy.snapshot()
  await sleep(seconds * 1000)
  const after = proxy.snapshot()
  await prod.stop()
  await Promise.all(workers.map((w) => w.stop()))
  proxy.close()
  const total = {reads: 0, writes: 0, rcu: 0, wcu: 0, ckptRcu: 0, ckptWcu: 0}
  if (process.env.KCL_BENCH_DETAIL) {
    for (const [key, c] of Object.entries(after)) {
      if (!key.includes(' ')) continue
      const b = before[key] || {}
      console.log(`  ${key}: ${c.requests - (b.requests || 0)} requests, ${(c.rcu - (b.rcu || 0)).toFixed(1)} read units, ` +
                  `${(c.wcu - (b.wcu || 0)).toFixed(1)} write units over ${seconds} s`)
    }
  }
  for (const [table, c] of Object.entries(after)) {
    if (table.includes(' ')) continue
    const b = before[table] || {}
    for (const k of Object.keys(total)) total[k] += c[k] - (b[k] || 0)
  }
  const perShardMinute = (n) => n / 24 / (seconds / 60)
  const per = {}
  for (const k of Object.keys(total)) per[k] = perShardMinute(total[k])
  const usd = (r, w) => (r * READ_UNIT_USD + w * WRITE_UNIT_USD) * MINUTES_PER_MONTH
  return {mode, balanced: ok, per, coordinationUsd: usd(per.rcu, per.wcu),
          totalUsd: usd(per.rcu + per.ckptRcu, per.wcu + per.ckptWcu)}
}

function steadyLine(s) {
  const p = s.per
  return `${s.mode.padEnd(13)} steady 12 workers x 24 shards${s.balanced ? '' : ' (never balanced 2/2)'}, per shard per minute: ` +
         `${p.reads.toFixed(1)} items read, ${p.writes.toFixed(1)} writes; billed units: coordination ` +
         `${p.rcu.toFixed(2)} read / ${p.wcu.toFixed(2)} write, checkpoints ${p.ckptRcu.toFixed(2)} read / ` +
         `${p.ckptWcu.toFixed(2)} write; $ per shard-month: coordination ${s.coordinationUsd.toFixed(3)}, ` +
         `all ${s.totalUsd.toFixed(3)}`
}

async function main() {
  const o = parseArgs(process.argv.slice(2))
  const kcl = path.join(o.buildDir, 'tools', 'kcl', 'kcl')
  const emu = spawn('node', [path.join(ROOT, 'tools', 'emulators', 'serve.js')], {stdio: ['pipe', 'pipe', 'inherit']})
  const urls = JSON.parse(await new Promise((resolve) => readline.createInterface({input: emu.stdout}).once('line', resolve)))
  const env = Object.assign({}, process.env, {
    AWS_ENDPOINT_URL_KINESIS: urls.kinesis, AWS_ENDPOINT_URL_DYNAMODB: urls.dynamodb,
    AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'bench', AWS_SECRET_ACCESS_KEY: 'bench-secret',
  })
  delete env.AWS_PROFILE
  try {
    for (const mode of o.modes) {
      for (const n of o.streams > 1 ? [1, o.streams] : [1]) {
        const j = await joinAndTakeover(kcl, env, urls, mode, n)
        const label = n > 1 ? ` (${n} streams)` : (o.streams > 1 ? ' (1 stream)' : '')
        console.log(`${mode.padEnd(13)} join${label} ${j.joinS === null ? 'not balanced in 180 s' : j.joinS.toFixed(1) + ' s'}` +
                    `, owner changes in the minute after ${j.flips}, records printed twice ${j.duplicates}` +
                    ` (of ${j.printed}), takeover after SIGKILL ${j.takeoverS === null ? 'not within 120 s' : j.takeoverS.toFixed(1) + ' s'}`)
      }
      if (!o.skipSteady) {
        const s = await steady(kcl, env, urls, mode, o.steadyS, o.http)
        console.log(steadyLine(s))
      }
    }
  } finally {
    await Promise.all([...started].map((w) => w.kill()))
    emu.stdin.end()
  }
}

main().catch((e) => { console.error(e); process.exit(1) })
