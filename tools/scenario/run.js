#!/usr/bin/env node
// The scenario runner: the demo and the fault suite of kcl-cpp.
//
//   node tools/scenario/run.js --profile demo  [--build-dir build/release]
//   node tools/scenario/run.js --profile short [--build-dir DIR] [--seed N]
//   node tools/scenario/run.js --profile soak --minutes 30 [--build-dir DIR] [--seed N]
//   options: --out DIR (run directory; default BUILD_DIR/scenario/<profile>-<time>),
//            --faults / --no-faults (override the profile), --quiet,
//            --limits (the AWS-limits proxy, limits_proxy.js, in front of the emulators:
//            workers, fault proxy and producer reach them through it; its counts go to
//            limits.json in the run directory), --limits-scale F (its per-second limits x F)
//
// What it does: starts kinesalite + dynalite (tools/emulators/serve.js, on a stdin pipe so
// they die with the runner), creates a stream, runs a producer (records {"key","n"} with a
// per-key counter, one record per key per PutRecords call so a key's order is the call
// order), runs M checking workers (tools/check_worker, built as kcl_check_worker), and
// follows the profile's timeline: split one shard, merge two adjacent shards, SIGKILL and
// restart workers, SIGSTOP/SIGCONT a worker (a zombie whose lease expires while it sleeps),
// take the emulators away and bring them back, inject faults through the fault proxy
// (fault_proxy.js) and try the special cases (wrong credentials, a lease table with the
// wrong schema). Then it stops the producer, waits until every record was processed,
// stops the workers gracefully (SIGTERM) and runs the checker (checker.js) over what it
// wrote down. Exit 0 when there is no violation, 1 otherwise, 2 on a setup error.
//
// Every child process is killed when the runner exits, also on an error or Ctrl-C; the
// workers also die with it on their own (PR_SET_PDEATHSIG), the emulators when their stdin
// closes.
'use strict'

const fs = require('fs')
const path = require('path')
const {spawn} = require('child_process')
const net = require('net')
const http = require('http')
const aws = require('./lib/aws')
const {startFaultProxy, KINDS, prng} = require('./fault_proxy')
const {check, summaryLine} = require('./checker')
const {selftest} = require('./checker_selftest')

const repo = path.resolve(__dirname, '..', '..')

// ---------------------------------------------------------------- options and profiles --

function parseArgs(argv) {
  const o = {profile: 'demo', buildDir: path.join(repo, 'build', 'release'), minutes: null, seed: null,
    out: null, faults: null, quiet: false, limits: false, limitsScale: 1}
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const v = () => {
      if (i + 1 >= argv.length) usage('missing value after ' + a)
      return argv[++i]
    }
    if (a === '--profile') o.profile = v()
    else if (a === '--build-dir') o.buildDir = path.resolve(v())
    else if (a === '--minutes') o.minutes = Number(v())
    else if (a === '--seed') o.seed = Number(v())
    else if (a === '--out') o.out = path.resolve(v())
    else if (a === '--faults') o.faults = true
    else if (a === '--no-faults') o.faults = false
    else if (a === '--quiet') o.quiet = true
    else if (a === '--limits') o.limits = true
    else if (a === '--limits-scale') {
      o.limits = true
      o.limitsScale = Number(v())
      if (!(o.limitsScale > 0)) usage('--limits-scale takes a number > 0')
    }
    else if (a === '-h' || a === '--help') usage(null)
    else usage('unknown argument: ' + a)
  }
  if (!['demo', 'short', 'soak', 'storm'].includes(o.profile)) usage('unknown profile ' + o.profile)
  return o
}

function usage(problem) {
  if (problem) process.stderr.write('run.js: ' + problem + '\n')
  process.stderr.write(
    'usage: node tools/scenario/run.js --profile demo|short|soak|storm [--minutes N] [--build-dir DIR]\n' +
      '         [--seed N] [--out DIR] [--faults|--no-faults] [--quiet] [--limits] [--limits-scale F]\n'
  )
  process.exit(problem ? 2 : 0)
}

// Fault rates per request. GetRecords and UpdateItem (renewals, checkpoints) carry most of
// the traffic and get most of the faults; stalls and drops are rarer because each costs a
// request timeout.
function faultRates(scale) {
  const r = (p) => p * scale
  const base = {
    error500: r(0.006), throughput: r(0.006), throttling: r(0.006), latency: r(0.01),
    drop: r(0.003), drop_after: r(0.003), stall: r(0.0015), truncated: r(0.003),
    invalid_json: r(0.003), wrong_content_type: r(0.003),
  }
  // Throughput errors and applied-but-failed writes where they matter most.
  return {
    default: base,
    'kinesis.GetRecords': {...base, throughput: r(0.012), invalid_json: r(0.004)},
    'dynamodb.UpdateItem': {...base, drop_after: r(0.006), truncated: r(0.004)},
  }
}

// The storm: a quarter of the calls to the coordination table fail (500s, throttles, non-JSON
// answers, stalls past the request timeout, connections dropped before and after the call
// was applied); everything else at the usual rates.
function stormRates() {
  return {
    ...faultRates(1),
    'dynamodb.coordination': {
      error500: 0.05, throttling: 0.05, invalid_json: 0.04, stall: 0.03, drop: 0.04, drop_after: 0.04,
    },
  }
}

// Every kind once on Kinesis GetRecords and once on DynamoDB UpdateItem (an applied write
// with a broken answer for the forward-first kinds), early in the run.
function forcedFaults() {
  const out = []
  for (const kind of KINDS) {
    out.push({kind, service: 'kinesis', op: 'GetRecords'})
    out.push({kind, service: 'dynamodb', op: 'UpdateItem'})
  }
  return out
}

function profiles(o) {
  // takeoverBoundS: the checker's bound (R7) on the time from a kill or pause to the first
  // record-processor start elsewhere for each of its shards: failover + 7 s. unreadBoundS: its
  // bound on how long a lease the table gives to a live worker may go unread: the period in
  // which an idle worker finds the leases the table gives it whatever became of the leader's
  // hints (every fifth idle read, each failover / 2 apart, jittered by up to 10 %: 8.25 s at
  // a 3 s failover), and 0.75 s to start the processor.
  const common = {
    shards: 4, keys: 40, rate: 100, workers: 3, failoverMs: 3000, takeIntervalMs: 1000,
    checkpointEvery: 25, requestTimeoutMs: 2000, stallMs: 3500, pollMs: 500,
    drainTimeoutS: 45, stopTimeoutS: 40, takeoverBoundS: 3 + 7, unreadBoundS: 9,
  }
  if (o.profile === 'demo') {
    return {
      ...common, name: 'demo', faults: false, requireAllFaults: false, produceS: 80, seed: 7, statusPages: true,
      timeline: [
        {at: 15, do: 'split'},
        {at: 30, do: 'kill', worker: 'busiest', restartAfter: 12},
        {at: 55, do: 'merge'},
      ],
    }
  }
  if (o.profile === 'short') {
    return {
      ...common, name: 'short', faults: true, requireAllFaults: true, produceS: 95, seed: 42, selftest: true,
      faultRates: faultRates(1), faultsFrom: 4, faultsUntil: 92, specials: true,
      timeline: [
        {at: 20, do: 'split'},
        {at: 30, do: 'kill', worker: 'w1', restartAfter: 7},
        {at: 45, do: 'pause', worker: 'w3', forMs: 7000},
        {at: 60, do: 'merge'},
        {at: 70, do: 'outage', ms: 5000},
        {at: 80, do: 'kill', worker: 'random', restartAfter: 5},
      ],
    }
  }
  if (o.profile === 'storm') {
    // Workers SIGKILLed one after another every 30 s, the leader every other time, while a
    // quarter of the coordination table's calls fail: every killed worker's shards must be
    // read again within 2 x failover + 7 s (the dead leader's lock lapses, then the dead
    // worker's silence is seen).
    const produceS = Math.max(90, Math.round((o.minutes || 4) * 60) - 30)
    const timeline = []
    for (let at = 25, i = 0; at < produceS - 25; at += 30, i++) {
      timeline.push({at, do: 'kill', worker: i % 2 === 0 ? 'leader' : 'random', restartAfter: 5})
    }
    return {
      ...common, name: 'storm', faults: true, requireAllFaults: false, produceS, seed: 31, selftest: false,
      faultRates: stormRates(), faultsFrom: 4, faultsUntil: produceS - 3, specials: false, timeline,
      takeoverBoundS: 2 * 3 + 7,
    }
  }
  // soak: events every ~40 s, chosen at random (seeded), faults all along.
  const minutes = o.minutes || 30
  const produceS = Math.max(60, Math.round(minutes * 60) - 30)
  const timeline = []
  const rnd = prng((o.seed == null ? 1234 : o.seed) + 99)
  const actions = ['kill', 'pause', 'reshard', 'kill', 'outage', 'reshard']
  for (let at = 20, i = 0; at < produceS - 25; at += 30 + Math.floor(rnd() * 20), i++) {
    const a = actions[i % actions.length]
    if (a === 'kill') timeline.push({at, do: 'kill', worker: 'random', restartAfter: 4 + Math.floor(rnd() * 8)})
    else if (a === 'pause') timeline.push({at, do: 'pause', worker: 'random', forMs: 4000 + Math.floor(rnd() * 6000)})
    else if (a === 'outage') timeline.push({at, do: 'outage', ms: 3000 + Math.floor(rnd() * 5000)})
    else timeline.push({at, do: 'reshard'})
  }
  return {
    ...common, name: 'soak', faults: true, requireAllFaults: true, produceS, seed: 1234, selftest: true,
    faultRates: faultRates(1), faultsFrom: 4, faultsUntil: produceS - 3, specials: true,
    minShards: 3, maxShards: 8, timeline,
  }
}

// ------------------------------------------------------------------- process registry --

const children = new Set()
function track(child) {
  children.add(child)
  child.on('exit', () => children.delete(child))
  return child
}
function killAll() {
  for (const c of children) {
    try {
      c.kill('SIGKILL')
    } catch (e) {
      // already gone
    }
  }
}
process.on('exit', killAll)
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    process.stderr.write(`\nrun.js: ${sig}: stopping every child process\n`)
    killAll()
    process.exit(sig === 'SIGINT' ? 130 : 143)
  })
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const nowUs = () => Date.now() * 1000

// Runs a command to completion; resolves {code, signal, stdout, stderr}.
function runCommand(cmd, args, env, timeoutMs = 60000) {
  return new Promise((resolve) => {
    const child = track(spawn(cmd, args, {env, stdio: ['ignore', 'pipe', 'pipe']}))
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({code, signal, stdout, stderr})
    })
    child.on('error', (e) => {
      clearTimeout(timer)
      resolve({code: -1, signal: null, stdout, stderr: stderr + String(e)})
    })
  })
}

// ---------------------------------------------------------------------- the emulators --

// Starts a node script that prints one JSON line when it is ready (the emulators, the limits
// proxy) on a stdin pipe, so that it dies with the runner; resolves {child, urls}.
function startJsonLineChild(script, args, what) {
  return new Promise((resolve, reject) => {
    const child = track(spawn(process.execPath, [script, ...args], {stdio: ['pipe', 'pipe', 'inherit']}))
    let buf = ''
    const timer = setTimeout(() => reject(new Error(`${what} did not start within 30 s`)), 30000)
    child.stdout.on('data', (d) => {
      buf += d
      const nl = buf.indexOf('\n')
      if (nl >= 0) {
        clearTimeout(timer)
        try {
          resolve({child, urls: JSON.parse(buf.slice(0, nl))})
        } catch (e) {
          reject(e)
        }
      }
    })
    child.on('exit', (code) => reject(new Error(`${what} exited with ${code}`)))
  })
}

const startEmulators = () => startJsonLineChild(path.join(repo, 'tools', 'emulators', 'serve.js'), [], 'the emulators')

// The limits proxy (limits_proxy.js) in front of the emulators; it writes its counts to
// statsOut when it stops.
const startLimits = (urls, scale, statsOut) =>
  startJsonLineChild(path.join(__dirname, 'limits_proxy.js'),
    ['--kinesis', urls.kinesis, '--dynamodb', urls.dynamodb, '--scale', String(scale), '--stats-out', statsOut],
    'the limits proxy')

// The limits proxy's counts, read from its stats endpoint.
function fetchJson(url) {
  return new Promise((resolve, reject) => {
    http.get(url, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => {
        try {
          resolve(JSON.parse(Buffer.concat(chunks).toString()))
        } catch (e) {
          reject(new Error(`${url}: not JSON`))
        }
      })
    }).on('error', reject)
  })
}

// ------------------------------------------------------------------------ the producer --

class Producer {
  constructor(endpoint, stream, keys, rate, file) {
    this.endpoint = endpoint
    this.stream = stream
    this.keys = Array.from({length: keys}, (_, i) => 'k' + i)
    this.counters = new Map(this.keys.map((k) => [k, 0]))
    this.rate = rate
    this.out = fs.openSync(file, 'a')
    this.count = 0
    this.retries = 0
    this.errors = 0
    this.next = 0
    this.stopped = false
    this.done = null
  }
  start() {
    this.done = this.loop()
  }
  async stop() {
    this.stopped = true
    await this.done
    fs.closeSync(this.out)
  }
  async loop() {
    const tickMs = 100
    let carry = 0
    let due = Date.now()
    while (!this.stopped) {
      carry += (this.rate * tickMs) / 1000
      const n = Math.min(Math.floor(carry), this.keys.length)
      carry -= n
      if (n > 0) await this.putBatch(n)
      due += tickMs
      const wait = due - Date.now()
      if (wait > 0) await sleep(wait)
      else due = Date.now()
    }
  }
  // One record for each of n distinct keys; failed entries are retried before the next
  // batch, so each key's records reach Kinesis in counter order.
  async putBatch(n) {
    let pending = []
    for (let i = 0; i < n; i++) {
      const key = this.keys[this.next]
      this.next = (this.next + 1) % this.keys.length
      const c = this.counters.get(key)
      this.counters.set(key, c + 1)
      pending.push({key, n: c})
    }
    for (let attempt = 0; pending.length; attempt++) {
      if (attempt > 0) {
        this.retries++
        await sleep(Math.min(1000, 50 * 2 ** attempt))
      }
      let r
      try {
        r = await aws.kinesis(this.endpoint, 'PutRecords', {
          StreamName: this.stream,
          Records: pending.map((p) => ({
            PartitionKey: p.key,
            Data: Buffer.from(JSON.stringify({key: p.key, n: p.n})).toString('base64'),
          })),
        })
      } catch (e) {
        this.errors++
        if (attempt > 20) throw e
        continue
      }
      const t = nowUs()
      const failed = []
      let lines = ''
      r.Records.forEach((res, i) => {
        if (res.ErrorCode) failed.push(pending[i])
        else {
          this.count++
          lines += JSON.stringify({key: pending[i].key, n: pending[i].n, shard: res.ShardId, seq: res.SequenceNumber, t}) + '\n'
        }
      })
      if (lines) fs.writeSync(this.out, lines)
      pending = failed
    }
  }
}

// ------------------------------------------------------------------- the worker fleet --

class Fleet {
  constructor(ctx) {
    this.ctx = ctx
    this.workers = new Map()  // id -> {id, child, alive, paused, log, base}
    this.generation = new Map()  // base name -> restarts
  }
  start(base) {
    const ctx = this.ctx
    const gen = this.generation.get(base) || 0
    this.generation.set(base, gen + 1)
    const id = gen === 0 ? base : `${base}-r${gen}`
    const log = path.join(ctx.dir, 'workers', id + '.log')
    const errFile = path.join(ctx.dir, 'workers', id + '.stderr')
    const err = fs.openSync(errFile, 'a')
    const p = ctx.p
    const args = [
      '--stream', ctx.stream, '--app', ctx.app, '--worker-id', id, '--log', log,
      '--checkpoint-every', String(p.checkpointEvery), '--failover-ms', String(p.failoverMs),
      '--take-interval-ms', String(p.takeIntervalMs), '--request-timeout-ms', String(p.requestTimeoutMs),
      '--shard-sync-ms', '5000', '--idle-ms', '250', '--max-records', '1000',
    ]
    // The demo's workers serve their status pages (each shows the whole fleet); a restarted
    // worker serves on its predecessor's port.
    if (ctx.httpPorts && ctx.httpPorts.has(base)) args.push('--http', `127.0.0.1:${ctx.httpPorts.get(base)}`)
    const child = track(spawn(ctx.workerBin, args, {env: ctx.workerEnv, stdio: ['ignore', err, err]}))
    fs.closeSync(err)
    const w = {id, base, child, alive: true, paused: false, log, errFile, expectExit: false, startedAt: nowUs()}
    this.workers.set(id, w)
    ctx.tailer.add(log)
    child.on('exit', (code, signal) => {
      w.alive = false
      const expected = w.expectExit && (signal === 'SIGKILL' || code === 0)
      let why = ''
      if (!expected) {
        try {
          why = fs.readFileSync(errFile, 'utf8').trim().split('\n').slice(-3).join(' | ')
        } catch (e) {
          why = ''
        }
        ctx.say(`worker ${id} exited unexpectedly: code ${code} signal ${signal} ${why}`)
      }
      ctx.event({type: 'exit', worker: id, code, signal, expected, why: expected ? undefined : why})
      if (!expected && !this.stopping) {
        // As a supervisor would: start a replacement (the checker still reports the exit).
        setTimeout(() => {
          if (!this.stopping) {
            const nw = this.start(base)
            ctx.event({type: 'restart', worker: nw.id, replaces: id})
            ctx.say(`restarted ${base} as ${nw.id} after the unexpected exit of ${id}`)
          }
        }, 2000)
      }
    })
    ctx.event({type: 'start', worker: id, pid: child.pid})
    return w
  }
  alive() {
    return [...this.workers.values()].filter((w) => w.alive)
  }
  // A worker by base name, 'random', or 'busiest' (the one holding the most unfinished
  // leases in `leases`, the latest lease-table poll).
  pick(name, rnd, leases = []) {
    if (name === 'busiest') {
      const live = this.alive().filter((w) => !w.paused)
      const held = (w) => leases.filter((l) => l.o === w.id && l.cp !== 'SHARD_END').length
      live.sort((a, b) => held(b) - held(a))
      return live[0] || null
    }
    if (name !== 'random') {
      return this.alive().find((w) => w.base === name && !w.paused) || null
    }
    const live = this.alive().filter((w) => !w.paused)
    return live.length ? live[Math.floor(rnd() * live.length)] : null
  }
  byId(id) {
    return this.alive().find((w) => w.id === id && !w.paused) || null
  }
  kill(w) {
    w.expectExit = true
    w.child.kill('SIGKILL')
  }
  async stopAll(timeoutS) {
    this.stopping = true
    const live = this.alive()
    for (const w of live) {
      if (w.paused) {
        w.child.kill('SIGCONT')
        w.paused = false
      }
      w.expectExit = true
      w.child.kill('SIGTERM')
    }
    const deadline = Date.now() + timeoutS * 1000
    while (this.alive().length && Date.now() < deadline) await sleep(100)
    const stuck = this.alive()
    for (const w of stuck) {
      w.expectExit = false
      w.child.kill('SIGKILL')
    }
    return stuck.map((w) => w.id)
  }
}

// Reads the workers' logs as they grow: counts distinct records processed.
class Tailer {
  constructor() {
    this.files = new Map()
    this.processed = new Set()
    this.lines = 0
    this.firstByShard = new Map()
  }
  add(file) {
    if (!this.files.has(file)) this.files.set(file, {offset: 0, rest: ''})
  }
  poll() {
    for (const [file, st] of this.files) {
      let fd
      try {
        fd = fs.openSync(file, 'r')
      } catch (e) {
        continue
      }
      try {
        const size = fs.fstatSync(fd).size
        if (size <= st.offset) continue
        const buf = Buffer.alloc(size - st.offset)
        fs.readSync(fd, buf, 0, buf.length, st.offset)
        st.offset = size
        const text = st.rest + buf.toString()
        const parts = text.split('\n')
        st.rest = parts.pop()
        for (const line of parts) {
          if (!line || line.startsWith('{"event"')) continue
          let r
          try {
            r = JSON.parse(line)
          } catch (e) {
            continue
          }
          this.lines++
          this.processed.add(r.shard + '/' + r.seq)
          if (!this.firstByShard.has(r.shard)) this.firstByShard.set(r.shard, r.t)
        }
      } finally {
        fs.closeSync(fd)
      }
    }
  }
}

// Polls the lease table straight from dynalite.
class LeasePoller {
  constructor(endpoint, table, file, intervalMs) {
    this.endpoint = endpoint
    this.table = table
    this.out = fs.openSync(file, 'a')
    this.intervalMs = intervalMs
    this.latest = []
    this.stopped = false
    this.polls = 0
    this.errors = 0
  }
  start() {
    this.done = (async () => {
      while (!this.stopped) {
        await this.pollOnce()
        await sleep(this.intervalMs)
      }
    })()
  }
  async pollOnce() {
    try {
      const ts = nowUs()
      const items = await aws.scanAll(this.endpoint, this.table)
      const t = nowUs()
      this.latest = items.map(leaseView)
      this.polls++
      fs.writeSync(this.out, JSON.stringify({ts, t, leases: this.latest}) + '\n')
    } catch (e) {
      if (!(e.type === 'ResourceNotFoundException')) this.errors++
    }
  }
  async stop() {
    this.stopped = true
    await this.done
    fs.closeSync(this.out)
  }
  ownedBy(worker) {
    return this.latest.filter((l) => l.o === worker).map((l) => l.k)
  }
}

// The worker holding the leader lock of leader-based assignment (null when none or unknown).
async function leaderId(ctx) {
  try {
    const items = await aws.scanAll(ctx.urls.dynamodb, ctx.app + '-CoordinatorState')
    const lock = items.find((i) => i.key === 'kcl-cpp/leader')
    return (lock && lock.ownerName) || null
  } catch (e) {
    return null
  }
}

function leaseView(l) {
  return {
    k: l.leaseKey,
    // The worker reading the shard: while a graceful handoff is pending (checkpointOwner set)
    // that is still the old owner, which may checkpoint until it completes the handoff.
    o: l.checkpointOwner || l.leaseOwner || null,
    to: l.checkpointOwner ? l.leaseOwner || null : null,
    c: Number(l.leaseCounter || 0),
    cp: l.checkpoint || '',
    sub: Number(l.checkpointSubSequenceNumber || 0),
    p: l.parentShardId || [],
  }
}

// ------------------------------------------------------------------------ resharding --

async function listShards(endpoint, stream) {
  const r = await aws.kinesis(endpoint, 'ListShards', {StreamName: stream})
  return r.Shards
}
const isOpen = (s) => !s.SequenceNumberRange.EndingSequenceNumber

async function split(ctx, rnd) {
  const shards = (await listShards(ctx.urls.kinesis, ctx.stream)).filter(isOpen)
  // The widest open shard (it holds the most keys); ties broken at random.
  shards.sort((a, b) => {
    const wa = BigInt(a.HashKeyRange.EndingHashKey) - BigInt(a.HashKeyRange.StartingHashKey)
    const wb = BigInt(b.HashKeyRange.EndingHashKey) - BigInt(b.HashKeyRange.StartingHashKey)
    return wa === wb ? rnd() - 0.5 : wb > wa ? 1 : -1
  })
  const parent = shards[0].ShardId
  const t = nowUs()
  const r = await runCommand(ctx.kclBin, ['split-shard', '--stream', ctx.stream, '--shard', parent], ctx.directEnv)
  if (r.code !== 0) throw new Error('kcl split-shard failed: ' + r.stderr)
  const children = (await listShards(ctx.urls.kinesis, ctx.stream))
    .filter((s) => s.ParentShardId === parent && !s.AdjacentParentShardId)
    .map((s) => s.ShardId)
  ctx.event({type: 'split', t, parents: [parent], children})
  ctx.say(`split ${parent} into ${children.join(' + ')}`)
}

async function merge(ctx, rnd) {
  const shards = (await listShards(ctx.urls.kinesis, ctx.stream)).filter(isOpen)
  shards.sort((a, b) => (BigInt(a.HashKeyRange.StartingHashKey) < BigInt(b.HashKeyRange.StartingHashKey) ? -1 : 1))
  const pairs = []
  for (let i = 0; i + 1 < shards.length; i++) {
    if (BigInt(shards[i].HashKeyRange.EndingHashKey) + 1n === BigInt(shards[i + 1].HashKeyRange.StartingHashKey)) {
      pairs.push([shards[i].ShardId, shards[i + 1].ShardId])
    }
  }
  if (!pairs.length) throw new Error('no two adjacent open shards to merge')
  const [a, b] = pairs[Math.floor(rnd() * pairs.length)]
  const t = nowUs()
  const r = await runCommand(
    ctx.kclBin, ['merge-shards', '--stream', ctx.stream, '--shard', a, '--adjacent-shard', b], ctx.directEnv
  )
  if (r.code !== 0) throw new Error('kcl merge-shards failed: ' + r.stderr)
  const children = (await listShards(ctx.urls.kinesis, ctx.stream))
    .filter((s) => s.AdjacentParentShardId && [a, b].includes(s.ParentShardId))
    .map((s) => s.ShardId)
  ctx.event({type: 'merge', t, parents: [a, b], children})
  ctx.say(`merged ${a} + ${b} into ${children.join(',')}`)
}

// ---------------------------------------------------------------------- special cases --

async function waitExit(child, ms) {
  if (child.exitCode !== null || child.signalCode !== null) return {code: child.exitCode, signal: child.signalCode}
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
    }, ms)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({code, signal})
    })
  })
}

function specialWorker(ctx, name, app, env) {
  const log = path.join(ctx.dir, 'special', name + '.log')
  const errFile = path.join(ctx.dir, 'special', name + '.stderr')
  const err = fs.openSync(errFile, 'w')
  const child = track(
    spawn(
      ctx.workerBin,
      ['--stream', ctx.stream, '--app', app, '--worker-id', name, '--log', log, '--failover-ms', '3000',
        '--request-timeout-ms', '2000'],
      {env, stdio: ['ignore', err, err]}
    )
  )
  fs.closeSync(err)
  return {child, errFile}
}

// Wrong credentials: the proxy answers UnrecognizedClientException for AKIDWRONG. The
// worker must exit non-zero with a clear message and create nothing.
async function specialWrongCredentials(ctx) {
  const app = ctx.app + '-badcreds'
  const env = {...ctx.workerEnv, AWS_ACCESS_KEY_ID: 'AKIDWRONG'}
  const {child, errFile} = specialWorker(ctx, 'wrong-credentials', app, env)
  const t0 = Date.now()
  const {code, signal} = await waitExit(child, 60000)
  const stderr = fs.readFileSync(errFile, 'utf8')
  const tables = (await aws.dynamodb(ctx.urls.dynamodb, 'ListTables', {})).TableNames
  const message = (stderr.split('\n').find((l) => /cannot start/.test(l)) || stderr.split('\n')[0] || '').trim()
  const problems = []
  if (signal || code === 0 || code === null) problems.push(`exit code ${code} signal ${signal} (expected non-zero)`)
  if (!/UnrecognizedClient|PERMISSION_DENIED|credential|security token/i.test(stderr)) {
    problems.push('no clear message about the credentials')
  }
  if (tables.includes(app)) problems.push(`lease table ${app} was created`)
  ctx.event({type: 'special', name: 'wrong credentials', ok: !problems.length,
    detail: problems.length ? problems.join('; ') : `exit ${code} after ${Date.now() - t0} ms: ${message}`})
}

// A lease table with the wrong schema (hash key "id"): the worker must exit non-zero
// naming the schema and leave the table as it was.
async function specialWrongSchema(ctx) {
  const table = ctx.app + '-badschema'
  const ddb = ctx.urls.dynamodb
  await aws.dynamodb(ddb, 'CreateTable', {
    TableName: table, KeySchema: [{AttributeName: 'id', KeyType: 'HASH'}],
    AttributeDefinitions: [{AttributeName: 'id', AttributeType: 'S'}], BillingMode: 'PAY_PER_REQUEST',
  })
  for (let i = 0; i < 50; i++) {
    const d = await aws.dynamodb(ddb, 'DescribeTable', {TableName: table})
    if (d.Table.TableStatus === 'ACTIVE') break
    await sleep(100)
  }
  await aws.dynamodb(ddb, 'PutItem', {TableName: table, Item: {id: {S: 'sentinel'}, v: {N: '1'}}})
  const {child, errFile} = specialWorker(ctx, 'wrong-schema', table, ctx.directEnv)
  const t0 = Date.now()
  const {code, signal} = await waitExit(child, 60000)
  const stderr = fs.readFileSync(errFile, 'utf8')
  const d = await aws.dynamodb(ddb, 'DescribeTable', {TableName: table})
  const items = await aws.scanAll(ddb, table)
  const message = (stderr.split('\n').find((l) => /cannot start/.test(l)) || '').trim()
  const problems = []
  if (signal || code === 0 || code === null) problems.push(`exit code ${code} signal ${signal} (expected non-zero)`)
  if (!/schema/i.test(stderr)) problems.push('the error does not name the schema')
  const ks = d.Table.KeySchema
  if (ks.length !== 1 || ks[0].AttributeName !== 'id') problems.push('the key schema changed')
  if (items.length !== 1 || items[0].id !== 'sentinel' || items[0].v !== '1') {
    problems.push(`the table's items changed (${items.length} items)`)
  }
  ctx.event({type: 'special', name: 'wrong lease table schema', ok: !problems.length,
    detail: problems.length ? problems.join('; ') : `exit ${code} after ${Date.now() - t0} ms: ${message}`})
}

// Keeps the `keep` newest run directories of a profile (names sort by time).
function pruneRuns(root, profile, keep) {
  if (!fs.existsSync(root)) return
  const runs = fs.readdirSync(root).filter((d) => d.startsWith(profile + '-')).sort()
  for (const d of runs.slice(0, Math.max(0, runs.length - keep))) {
    fs.rmSync(path.join(root, d), {recursive: true, force: true})
  }
}

// ------------------------------------------------------------------------------- main --

// A free port on 127.0.0.1 (asked of the kernel, then released for a worker to take).
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const port = srv.address().port
      srv.close(() => resolve(port))
    })
  })
}

async function main() {
  const o = parseArgs(process.argv.slice(2))
  const p = profiles(o)
  if (o.seed != null) p.seed = o.seed
  if (o.faults != null) p.faults = o.faults
  if (!p.faults) p.requireAllFaults = false
  if (p.faults && !p.faultRates) {
    // --faults on a profile without its own fault plan (the demo): the usual rates, all along.
    Object.assign(p, {faultRates: faultRates(1), faultsFrom: 4, faultsUntil: p.produceS - 3})
  }
  const started = Date.now()
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-')
  const dir = o.out || path.join(o.buildDir, 'scenario', `${p.name}-${stamp}`)
  if (!o.out) pruneRuns(path.join(o.buildDir, 'scenario'), p.name, 5)
  fs.mkdirSync(path.join(dir, 'workers'), {recursive: true})
  fs.mkdirSync(path.join(dir, 'special'), {recursive: true})
  const workerBin = path.join(o.buildDir, 'tools', 'check_worker', 'kcl_check_worker')
  const kclBin = path.join(o.buildDir, 'tools', 'kcl', 'kcl')
  for (const b of [workerBin, kclBin]) {
    if (!fs.existsSync(b)) {
      process.stderr.write(`run.js: ${b} is missing: build the targets kcl_cli and kcl_check_worker first\n`)
      process.exit(2)
    }
  }
  const rnd = prng(p.seed + 7)
  const t0 = nowUs()
  const elapsed = () => ((nowUs() - t0) / 1e6).toFixed(0).padStart(3)
  const say = (msg) => {
    if (!o.quiet || /unexpected|error|FAIL/.test(msg)) process.stdout.write(`[+${elapsed()}s] ${msg}\n`)
  }
  const eventsFd = fs.openSync(path.join(dir, 'events.jsonl'), 'a')
  const event = (e) => fs.writeSync(eventsFd, JSON.stringify({t: nowUs(), ...e}) + '\n')

  say(`profile ${p.name}: ${p.shards} shards, ${p.workers} workers, ${p.rate} records/s for ${p.produceS} s, ` +
    `failover ${p.failoverMs} ms, checkpoint every ${p.checkpointEvery} records` +
    (p.faults ? `, fault proxy on (seed ${p.seed})` : '') + `; run directory ${path.relative(process.cwd(), dir) || dir}`)

  const emu = await startEmulators()
  const urls = emu.urls
  say(`emulators: kinesis ${urls.kinesis}, dynamodb ${urls.dynamodb}`)
  // What the system under test reaches: the emulators, or the limits proxy in front of them.
  let front = urls
  let limits = null
  if (o.limits) {
    limits = await startLimits(urls, o.limitsScale, path.join(dir, 'limits.json'))
    front = limits.urls
    say(`limits proxy (AWS limits x ${o.limitsScale}): kinesis ${front.kinesis}, dynamodb ${front.dynamodb}, stats ${front.stats}`)
  }
  const stream = `scenario-${p.name}`
  const app = `scenario-${p.name}-app`
  const baseEnv = {...process.env, AWS_ACCESS_KEY_ID: 'AKIDSCENARIO', AWS_SECRET_ACCESS_KEY: 'scenario-secret',
    AWS_REGION: 'us-east-1', KCL_LOG_LEVEL: process.env.KCL_LOG_LEVEL || 'info'}
  delete baseEnv.AWS_SESSION_TOKEN
  delete baseEnv.AWS_PROFILE
  delete baseEnv.AWS_ENDPOINT_URL
  const directEnv = {...baseEnv, AWS_ENDPOINT_URL_KINESIS: urls.kinesis, AWS_ENDPOINT_URL_DYNAMODB: urls.dynamodb}
  const frontEnv = {...baseEnv, AWS_ENDPOINT_URL_KINESIS: front.kinesis, AWS_ENDPOINT_URL_DYNAMODB: front.dynamodb}

  let proxy = null
  let workerEnv = frontEnv
  if (p.faults || p.specials) {
    proxy = await startFaultProxy(front, {
      seed: p.seed, rates: p.faultRates || {}, forced: p.requireAllFaults ? forcedFaults() : [],
      stallMs: p.stallMs, latencyMs: [100, 700], rejectAccessKeys: ['AKIDWRONG'], enabled: false,
    })
    workerEnv = {...baseEnv, AWS_ENDPOINT_URL_KINESIS: proxy.urls.kinesis, AWS_ENDPOINT_URL_DYNAMODB: proxy.urls.dynamodb}
    say(`fault proxy: kinesis ${proxy.urls.kinesis}, dynamodb ${proxy.urls.dynamodb}`)
  }

  fs.writeFileSync(path.join(dir, 'meta.json'), JSON.stringify({
    profile: p.name, stream, app, t0, seed: p.seed, requireAllFaults: p.requireAllFaults, options: p,
  }, null, 2))

  const tailer = new Tailer()
  const ctx = {dir, p, stream, app, urls, workerBin, kclBin, directEnv, workerEnv, tailer, say, event}

  const created = await runCommand(kclBin, ['create-stream', '--stream', stream, '--shards', String(p.shards)], directEnv)
  if (created.code !== 0) throw new Error('kcl create-stream failed: ' + created.stderr)
  say(`stream ${stream} created with ${p.shards} shards (kcl create-stream)`)

  const producer = new Producer(front.kinesis, stream, p.keys, p.rate, path.join(dir, 'produced.jsonl'))
  producer.start()
  const poller = new LeasePoller(urls.dynamodb, app, path.join(dir, 'leases.jsonl'), p.pollMs)
  poller.start()
  if (p.statusPages) {
    ctx.httpPorts = new Map()
    for (let i = 1; i <= p.workers; i++) ctx.httpPorts.set('w' + i, await freePort())
  }
  const fleet = new Fleet(ctx)
  for (let i = 1; i <= p.workers; i++) fleet.start('w' + i)
  say(`producer started; workers ${[...fleet.workers.keys()].join(', ')} started`)
  if (p.statusPages) {
    say(`status page of the fleet (open it while the demo runs): http://127.0.0.1:${ctx.httpPorts.get('w1')}/status`)
  }

  const specials = []
  if (p.specials) {
    specials.push(specialWrongCredentials(ctx).catch((e) => event({type: 'special', name: 'wrong credentials', ok: false, detail: String(e)})))
    specials.push(specialWrongSchema(ctx).catch((e) => event({type: 'special', name: 'wrong lease table schema', ok: false, detail: String(e)})))
  }

  // Progress every 10 s.
  const progress = setInterval(() => {
    tailer.poll()
    const owners = {}
    for (const l of poller.latest) owners[l.o || '-'] = (owners[l.o || '-'] || 0) + 1
    const f = proxy && p.faults ? proxy.counts() : null
    const nf = f ? KINDS.reduce((a, k) => a + f[k], 0) : 0
    say(`produced ${producer.count}, processed ${tailer.processed.size} distinct (${tailer.lines} deliveries); ` +
      `leases ${Object.entries(owners).sort().map(([k, v]) => k + ':' + v).join(' ')}` + (f ? `; faults ${nf}` : ''))
  }, 10000)

  // Timeline.
  const timers = []
  const pendingActions = []
  const at = (s, fn) =>
    timers.push(setTimeout(() => pendingActions.push(fn().catch((e) => {
      say('action failed: ' + (e && e.stack ? e.stack : e))
      event({type: 'special', name: 'runner action', ok: false, detail: String(e)})
    })), s * 1000))
  if (proxy && p.faults) {
    at(p.faultsFrom, async () => {
      proxy.enable()
      say(`fault injection on (${forcedFaults().length} forced faults first, then random)`)
    })
    at(p.faultsUntil, async () => {
      proxy.disable()
      say('fault injection off')
    })
  }
  let reshardToggle = 0
  for (const step of p.timeline) {
    at(step.at, async () => {
      switch (step.do) {
        case 'split':
          return split(ctx, rnd)
        case 'merge':
          return merge(ctx, rnd)
        case 'reshard': {
          const open = (await listShards(urls.kinesis, stream)).filter(isOpen).length
          const doSplit = open <= p.minShards ? true : open >= p.maxShards ? false : reshardToggle++ % 2 === 0
          return doSplit ? split(ctx, rnd) : merge(ctx, rnd)
        }
        case 'kill': {
          const w = step.worker === 'leader'
            ? fleet.byId(await leaderId(ctx)) || fleet.pick('random', rnd)
            : fleet.pick(step.worker, rnd, poller.latest)
          if (!w) return say('kill: no live worker')
          const leases = poller.ownedBy(w.id)
          fleet.kill(w)
          event({type: 'kill', worker: w.id, leases})
          say(`SIGKILL ${w.id} (held ${leases.length} leases: ${leases.join(' ') || '-'})`)
          await sleep(step.restartAfter * 1000)
          const nw = fleet.start(w.base)
          event({type: 'restart', worker: nw.id, replaces: w.id})
          say(`restarted ${w.base} as ${nw.id}`)
          return
        }
        case 'pause': {
          const w = fleet.pick(step.worker, rnd)
          if (!w) return say('pause: no live worker')
          const leases = poller.ownedBy(w.id)
          w.paused = true
          w.child.kill('SIGSTOP')
          event({type: 'pause', worker: w.id, leases, ms: step.forMs})
          say(`SIGSTOP ${w.id} for ${step.forMs} ms (held ${leases.length} leases) — it wakes as a zombie`)
          await sleep(step.forMs)
          if (w.alive) {
            w.child.kill('SIGCONT')
            w.paused = false
            event({type: 'resume', worker: w.id})
            say(`SIGCONT ${w.id}`)
          }
          return
        }
        case 'outage': {
          if (!proxy) return say('outage: no proxy')
          event({type: 'outage', ms: step.ms})
          say(`emulators unreachable for ${step.ms} ms (the proxy refuses connections)`)
          await proxy.outage(step.ms)
          event({type: 'outage_end'})
          say('emulators reachable again')
          return
        }
      }
    })
  }

  await sleep(p.produceS * 1000)
  await producer.stop()
  event({type: 'producer_stopped', count: producer.count})
  say(`producer stopped after ${producer.count} records (${producer.retries} retried calls)`)
  await Promise.all(pendingActions)
  await Promise.all(specials)
  if (proxy) proxy.disable()

  // Drain: every produced record processed, no lease held by a dead or paused worker.
  const drainStart = Date.now()
  for (;;) {
    tailer.poll()
    const liveIds = new Set(fleet.alive().filter((w) => !w.paused).map((w) => w.id))
    const orphaned = poller.latest.filter((l) => l.o && !liveIds.has(l.o))
    if (tailer.processed.size >= producer.count && !orphaned.length) break
    if (Date.now() - drainStart > p.drainTimeoutS * 1000) {
      say(`drain: gave up after ${p.drainTimeoutS} s (${producer.count - tailer.processed.size} records not ` +
        `processed, ${orphaned.length} leases of dead workers)`)
      break
    }
    await sleep(250)
  }
  event({type: 'drain', seconds: (Date.now() - drainStart) / 1000})
  say(`all ${tailer.processed.size} records processed (drain ${((Date.now() - drainStart) / 1000).toFixed(1)} s); ` +
    'stopping the workers gracefully (SIGTERM)')
  clearInterval(progress)
  const stuck = await fleet.stopAll(p.stopTimeoutS)
  if (stuck.length) {
    event({type: 'special', name: 'graceful stop', ok: false, detail: `did not stop within ${p.stopTimeoutS} s: ${stuck.join(' ')}`})
  }
  await poller.stop()
  const finalLeases = (await aws.scanAll(urls.dynamodb, app)).map(leaseView)
  fs.writeFileSync(path.join(dir, 'final_leases.json'), JSON.stringify(finalLeases, null, 1))
  if (proxy) {
    fs.writeFileSync(path.join(dir, 'faults.json'), JSON.stringify({kinds: p.faults ? KINDS : [], counts: proxy.counts()}, null, 1))
    proxy.close()
  }
  let limitStats = null
  if (limits) {
    try {
      limitStats = await fetchJson(front.stats)
    } catch (e) {
      say(`limits proxy: cannot read its stats (${e.message})`)
    }
    const exited = new Promise((resolve) => limits.child.once('exit', resolve))
    limits.child.stdin.end()  // it writes limits.json and exits
    await Promise.race([exited, sleep(5000)])
  }
  fs.closeSync(eventsFd)
  for (const t of timers) clearTimeout(t)
  emu.child.stdin.end()
  emu.child.kill('SIGTERM')

  const report = check(dir)
  report.workerLogs = summariseWorkerLogs(dir)
  if (limitStats) report.limits = summariseLimits(limitStats)
  if (p.selftest && !report.violationCount) {
    // Plant violations in copies of this run and make sure the checker sees each one.
    const results = selftest(dir)
    const missed = results.filter((x) => !x.detected)
    report.selftest = `${results.length - missed.length}/${results.length} planted violations detected`
    if (missed.length) {
      report.violations.checker = missed.length
      report.violationCount += missed.length
      for (const m of missed) report.examples.push(`checker: planted ${m.name} not detected (${m.note})`)
    }
  }
  fs.writeFileSync(path.join(dir, 'report.json'), JSON.stringify(report, null, 2))
  const seconds = (Date.now() - started) / 1000
  printReport(p, report, dir, seconds)
  return report.violationCount ? 1 : 0
}

// The limits proxy's counts in short: calls, throttles and the highest per-key rate of each API.
function summariseLimits(st) {
  const apis = {}
  for (const [api, a] of Object.entries(st.apis)) apis[api] = {calls: a.calls, throttled: a.throttled, peakPerKey: a.peakPerKey}
  return {throttles: st.throttles, scale: st.scale, apis}
}

// Counts the library's ERROR and WARN lines in the workers' stderr, by message pattern.
function summariseWorkerLogs(dir) {
  const counts = {ERROR: new Map(), WARN: new Map()}
  const wdir = path.join(dir, 'workers')
  for (const f of fs.readdirSync(wdir).filter((x) => x.endsWith('.stderr'))) {
    for (const line of fs.readFileSync(path.join(wdir, f), 'utf8').split('\n')) {
      const m = /^\S+ (ERROR|WARN)\s+\[([^\]]*)\] (.*)$/.exec(line)
      if (!m) continue
      const pattern = (m[2].replace(/ .*/, '') + ': ' + m[3])
        .replace(/shardId-\d+/g, 'shardId-N')
        .replace(/127\.0\.0\.1:\d+/g, 'HOST')
        .replace(/\d{3,}/g, 'N')
        .replace(/\[operation=.*$/, '')
        .slice(0, 170)
      const c = counts[m[1]]
      c.set(pattern, (c.get(pattern) || 0) + 1)
    }
  }
  const top = (c) => [...c.entries()].sort((a, b) => b[1] - a[1]).map(([k, v]) => ({n: v, message: k}))
  const total = (c) => [...c.values()].reduce((a, b) => a + b, 0)
  return {errors: total(counts.ERROR), warnings: total(counts.WARN), topErrors: top(counts.ERROR).slice(0, 8),
    topWarnings: top(counts.WARN).slice(0, 8)}
}

function printReport(p, r, dir, seconds) {
  const out = []
  const s = (x) => (x == null ? 'n/a' : x.toFixed(1) + ' s')
  out.push('')
  out.push(`=== verification (${p.name}) ===`)
  out.push(`records produced:             ${r.produced}`)
  out.push(`records processed:            ${r.processed} deliveries, ${r.uniqueProcessed} distinct, ${r.missing} missing`)
  out.push(`duplicates:                   ${r.duplicates}` +
    (r.duplicates ? ` (${Object.entries(r.duplicateCauses).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k}: ${v}`).join(', ')})` : ''))
  out.push(`order violations (per key):   ${r.violations.R2 || 0}`)
  out.push(`checkpoints:                  ${r.checkpointsAccepted} written, ${r.checkpointsFailed} failed ` +
    `(${r.zombieCheckpointsRejected} rejected as lease lost); never decreasing in ${r.leasePolls} lease-table polls: ` +
    `${r.violations.R3 ? 'NO' : 'yes'}`)
  const stats = (xs) => {
    const v = xs.filter((x) => x != null).sort((a, b) => a - b)
    if (!v.length) return 'n/a'
    return `median ${v[Math.floor(v.length / 2)].toFixed(1)} s, max ${v[v.length - 1].toFixed(1)} s` +
      (v.length < xs.length ? ` (${xs.length - v.length} not measured)` : '')
  }
  const takeovers = r.timings.takeovers.filter((t) => t.shards)
  const bound = r.takeoverBoundS ? ` (bound ${r.takeoverBoundS} s)` : ''
  if (r.timings.takeovers.length > 4) {
    out.push(`takeovers after ${takeovers.length} kills/pauses: first record-processor start elsewhere ` +
      `${stats(takeovers.map((t) => t.initSeconds))}${bound}; new owners in the lease table ` +
      `${stats(takeovers.map((t) => t.tableSeconds))}`)
    for (const t of takeovers) {
      out.push(`  ${t.type} of ${t.worker}: ${t.shards} shards, first start elsewhere after ${s(t.initSeconds)}, ` +
        `new owners in the table after ${s(t.tableSeconds)}` +
        (t.readBySelf ? ` (it resumed first and read them again itself after ${s(t.readSeconds)})` : ''))
    }
  } else {
    for (const t of r.timings.takeovers) {
      out.push(`takeover after ${t.type} of ${t.worker}: ` +
        (t.shards ? `${t.shards} shards, first record-processor start elsewhere after ${s(t.initSeconds)} ` +
          `(lease table shows new owners after ${s(t.tableSeconds)})` +
          (t.readBySelf ? `; it resumed first and read them again itself after ${s(t.readSeconds)}` : '')
          : 'it held no unfinished shard'))
    }
  }
  if (r.timings.children.length > 4) {
    const cs = r.timings.children
    out.push(`children after ${cs.length} splits/merges: started ${stats(cs.map((c) => c.firstInitSeconds))}; ` +
      `first child record ${stats(cs.map((c) => c.firstRecordSeconds))}`)
  } else {
    for (const c of r.timings.children) {
      out.push(`${c.type} ${c.parents.join('+')} -> ${c.children.join('+')}: children started after ` +
        `${s(c.firstInitSeconds)}, first child record processed after ${s(c.firstRecordSeconds)}`)
    }
  }
  for (const sp of r.specials) out.push(`special case "${sp.name}": ${sp.ok ? 'ok' : 'FAILED'} — ${sp.detail}`)
  if (r.faultCounts && r.faultsInjected) {
    out.push(`faults injected: ${r.faultsInjected} (${Object.entries(r.faultKinds).map(([k, v]) => `${k} ${v}`).join(', ')}); ` +
      `${r.faultCounts.requests} requests through the proxy`)
  }
  if (r.limits) {
    const busy = Object.entries(r.limits.apis).filter(([, a]) => a.throttled || a.calls >= 50)
      .map(([api, a]) => `${api} ${a.calls}${a.throttled ? ` (${a.throttled} throttled)` : ''} peak ${a.peakPerKey}/s`)
    out.push(`limits proxy (AWS limits x ${r.limits.scale}): ${r.limits.throttles} throttles; ${busy.join(', ')}`)
  }
  if (r.takeoverBoundS) {
    out.push(`leases a live worker owned but did not read within ${r.unreadBoundS} s: ${r.silentOwners}` +
      ` (the longest unread: ${r.longestUnreadS} s)`)
  }
  out.push(`leases owned after the graceful stop: ` +
    (r.ownedAfterStop == null ? 'unknown (the lease table was not read after the stop)' : r.ownedAfterStop))
  out.push(`batches handed to a processor after its checkpoint was answered LEASE_LOST: ` +
    `${r.batchesAfterLeaseLost} (${r.recordsAfterLeaseLost} records, not processed)`)
  if (r.workerLogs) {
    out.push(`library log lines: ${r.workerLogs.errors} ERROR, ${r.workerLogs.warnings} WARN` +
      (r.workerLogs.errors ? '; most frequent errors:' : ''))
    for (const e of r.workerLogs.topErrors.slice(0, 4)) out.push(`  ${String(e.n).padStart(4)} x ${e.message}`)
  }
  if (r.selftest) out.push(`checker self-test: ${r.selftest}`)
  if (r.violationCount) {
    out.push(`VIOLATIONS: ${JSON.stringify(r.violations)}`)
    for (const e of r.examples) out.push('  ' + e)
  }
  out.push(`run directory: ${dir}`)
  out.push(summaryLine(p.name, r, seconds))
  process.stdout.write(out.join('\n') + '\n')
}

main()
  .then((code) => {
    killAll()
    process.exit(code)
  })
  .catch((e) => {
    process.stderr.write('run.js: ' + (e && e.stack ? e.stack : e) + '\n')
    killAll()
    process.exit(2)
  })
