// The scenario checker: reads a run directory written by run.js and checks the invariants.
//
//   node tools/scenario/checker.js RUN_DIR      (prints the report; exit 1 on a violation)
//
// Inputs (all times are wall-clock microseconds since the epoch; every process runs on one
// host, so the checker may compare them; the library itself never compares wall clocks):
//   meta.json          profile, stream, app, options
//   produced.jsonl     {key, n, shard, seq, t}: every record the producer wrote, with the
//                      shard and sequence number Kinesis gave it
//   events.jsonl       the runner's actions and observations: kill, restart, pause, resume,
//                      split, merge, outage, exit (a worker process ended), special (the
//                      special cases), drain
//   leases.jsonl       lease-table polls {ts, t, leases: [{k, o, c, cp, sub}]} (ts: scan
//                      begun, t: answered)
//   final_leases.json  the lease table after the graceful stop
//   faults.json        the fault proxy's counts (when it ran)
//   workers/*.log      the checking workers' logs (see tools/check_worker/check_worker.cpp)
//
// Rules (a violation of any makes the run fail):
//  R1 every produced record was processed at least once.
//  R2 order. Per processor instance (one lease holding of one worker process: "worker#inst"),
//     records come in strictly increasing sequence order with no gap: the first is the first
//     record of the shard after the checkpoint the instance started from (TRIM_HORIZON = the
//     shard's first record) and each next one is the shard's next record. As the producer
//     writes a key's counters in order into the shard that holds its hash key, this means a
//     key's counters strictly increase within an instance. A replay is a later instance of
//     the shard restarting at its (older) start checkpoint: it may repeat records, never
//     reorder or skip them. Across instances and along the shard lineage (parents before
//     children): per key, the FIRST processing of the records follows production order,
//     i.e. first_time(key, n+1) >= first_time(key, n). A replay only repeats records that
//     were already processed, so it cannot break this; a child read before its parent was
//     finished, or a record skipped and read later, does.
//     Each record's data ({"key","n"}) must also match what was produced under its sequence
//     number.
//  R3 the checkpoint of every lease, as polled from the lease table during the run, never
//     decreases (TRIM_HORIZON/LATEST < sequence numbers < SHARD_END).
//  R4 duplicates come only from records after a lost lease's last checkpoint: every
//     instance that holds its lease starts at or after the newest checkpoint that was
//     accepted (by any worker's log, or seen in the lease table) before it initialised. An
//     instance that starts further back and then has a checkpoint accepted is a violation;
//     one that never has a write accepted was made for a lease already lost again (a steal
//     right after a take) and is counted as "stale". The number of duplicate deliveries is
//     reported, each put down to its cause: a replay by a later instance after the earlier
//     one was killed, lost its lease or stopped, or a late delivery by an earlier instance
//     that had not yet noticed that its lease had passed on.
//  R5 no zombie checkpoint: a checkpoint write accepted (ok and the stored checkpoint moved)
//     from instance P of shard X in a call that began after evidence that P's lease had
//     passed on — a later instance Q of X had a checkpoint accepted, or a lease-table read
//     begun after P initialised showed another owner — is a violation. The owner a read
//     shows is the worker reading the shard: while a graceful handoff is pending that is the
//     checkpointOwner (the old owner, which checkpoints before it hands over).
//  R6 after the graceful stop no lease has an owner.
//  R7 liveness, within the profile's bound (options.takeoverBoundS): after every kill or pause,
//     each of the worker's unfinished shards has a record processor started on another worker
//     within the bound (after a pause, one the paused worker starts once it resumed counts:
//     a pause that ends before the leader may fence the worker, it reads them again itself);
//     and a lease the table gives to a live worker (running, not paused,
//     before the graceful stop; no handoff pending; its parents finished) is being read by
//     it: that worker starts a processor for the shard within options.unreadBoundS (the
//     period in which a worker finds its leases in the table; takeoverBoundS when unset) of
//     the lease becoming its own (or of the worker becoming live again). The report gives the
//     longest such unread time (longestUnreadS).
//  Also: every worker the runner did not kill exits 0 after SIGTERM ("crash" otherwise;
//  "start" when Worker::start() failed under the injected faults); the special cases end
//  as expected; in profiles that ask for it every fault kind of the proxy was
//  injected at least once.
'use strict'

const fs = require('fs')
const path = require('path')
const {compareSeq, compareExt} = require('./lib/aws')

function readJsonl(file) {
  if (!fs.existsSync(file)) return []
  const out = []
  const text = fs.readFileSync(file, 'utf8')
  for (const line of text.split('\n')) {
    if (!line) continue
    try {
      out.push(JSON.parse(line))
    } catch (e) {
      // A line cut by SIGKILL mid-write cannot happen with one write(2) per batch, but a
      // torn last line is tolerated rather than fatal.
    }
  }
  return out
}

function readJson(file, dflt) {
  return fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : dflt
}

const sec = (us) => (us / 1e6).toFixed(1)

function check(dir) {
  const meta = readJson(path.join(dir, 'meta.json'), {})
  const produced = readJsonl(path.join(dir, 'produced.jsonl'))
  const events = readJsonl(path.join(dir, 'events.jsonl'))
  const polls = readJsonl(path.join(dir, 'leases.jsonl'))
  const finalLeases = readJson(path.join(dir, 'final_leases.json'), null)
  const faults = readJson(path.join(dir, 'faults.json'), null)
  const wdir = path.join(dir, 'workers')
  const logFiles = fs.existsSync(wdir) ? fs.readdirSync(wdir).filter((f) => f.endsWith('.log')) : []

  const violations = {}
  const examples = []
  const violate = (rule, msg) => {
    violations[rule] = (violations[rule] || 0) + 1
    if (examples.length < 40) examples.push(`${rule}: ${msg}`)
  }

  // --- produced records ---
  const byId = new Map()  // "shard/seq" -> {key, n, shard, seq, idx}
  const byShard = new Map()
  const byKey = new Map()
  for (const p of produced) {
    const id = p.shard + '/' + p.seq
    byId.set(id, p)
    if (!byShard.has(p.shard)) byShard.set(p.shard, [])
    byShard.get(p.shard).push(p)
    if (!byKey.has(p.key)) byKey.set(p.key, [])
    byKey.get(p.key).push(p)
  }
  for (const list of byShard.values()) {
    list.sort((a, b) => compareSeq(a.seq, b.seq))
    list.forEach((p, i) => (p.idx = i))
  }
  // First index in a shard's list with seq > s.
  const firstAfter = (list, s) => {
    let lo = 0
    let hi = list.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (compareSeq(list[mid].seq, s) <= 0) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  // --- worker logs ---
  const instances = new Map()  // "worker#inst" -> {...}
  const checkpoints = []
  const stops = []
  const starts = []
  const seen = new Map()  // id -> {count, firstT, firstInst}
  let processedLines = 0
  // Batches kcl-cpp handed to a processor after one of its checkpoints was answered
  // LEASE_LOST (the checking processor logs them and processes nothing): a zombie's work.
  const afterLost = {batches: 0, records: 0}
  const inst = (worker, n, shard) => {
    const id = worker + '#' + n
    if (!instances.has(id)) {
      instances.set(id, {id, worker, shard, initT: null, start: null, records: [], end: null, cps: []})
    }
    return instances.get(id)
  }
  for (const f of logFiles) {
    for (const e of readJsonl(path.join(wdir, f))) {
      if (e.event === undefined) {
        processedLines++
        const i = inst(e.worker, e.inst, e.shard)
        i.records.push(e)
        const id = e.shard + '/' + e.seq
        const s = seen.get(id)
        if (!s) seen.set(id, {count: 1, firstT: e.t, firstInst: i.id, insts: [i.id]})
        else {
          s.count++
          s.insts.push(i.id)
          if (e.t < s.firstT) {
            s.firstT = e.t
            s.firstInst = i.id
          }
        }
        continue
      }
      switch (e.event) {
        case 'init': {
          const i = inst(e.worker, e.inst, e.shard)
          i.initT = e.t
          i.start = e.start
          i.startSub = e.startSub || 0
          break
        }
        case 'checkpoint': {
          const i = inst(e.worker, e.inst, e.shard)
          const cp = {...e, instId: i.id}
          i.cps.push(cp)
          checkpoints.push(cp)
          break
        }
        case 'lease_lost':
        case 'shard_ended':
        case 'shutdown_requested': {
          const i = inst(e.worker, e.inst, e.shard)
          i.end = e.event
          i.endT = e.t
          break
        }
        case 'after_lost':
          afterLost.batches++
          afterLost.records += e.records || 0
          break
        case 'start':
          starts.push(e)
          break
        case 'stop':
          stops.push(e)
          break
      }
    }
  }

  // --- R2 per instance: order and contiguity; data matches ---
  let gaps = 0
  for (const i of instances.values()) {
    if (!i.records.length) continue
    const list = byShard.get(i.shard) || []
    let expected = null
    if (i.start === 'TRIM_HORIZON') expected = 0
    else if (/^\d+$/.test(i.start || '')) expected = firstAfter(list, i.start)
    else if (i.start === 'SHARD_END') {
      violate('R2', `${i.id} started at SHARD_END of ${i.shard} yet processed ${i.records.length} records`)
      continue
    }
    let prevSeq = null
    for (const r of i.records) {
      if (r.shard !== i.shard) violate('R2', `${i.id} (${i.shard}) got a record of ${r.shard}`)
      if (prevSeq !== null && compareSeq(r.seq, prevSeq) <= 0) {
        violate('R2', `${i.id} ${i.shard}: sequence ${r.seq} after ${prevSeq} (not increasing)`)
      }
      prevSeq = r.seq
      const p = byId.get(r.shard + '/' + r.seq)
      if (!p) {
        violate('R2', `${i.id} processed ${r.shard}/${r.seq}, which the producer never wrote`)
        continue
      }
      if (p.key !== r.key || p.n !== r.n) {
        violate('R2', `${i.id} ${r.shard}/${r.seq}: data key=${r.key} n=${r.n}, produced key=${p.key} n=${p.n}`)
      }
      if (expected !== null && p.idx !== expected) {
        if (p.idx > expected) {
          gaps++
          violate(
            'R2',
            `${i.id} ${i.shard}: skipped ${p.idx - expected} record(s) before ${r.seq} ` +
              `(key ${list[expected].key} n=${list[expected].n} first skipped)`
          )
        } else {
          violate('R2', `${i.id} ${i.shard}: went back to ${r.seq}`)
        }
      }
      expected = p.idx + 1
    }
  }

  // --- R1: everything processed ---
  let missing = 0
  for (const [id, p] of byId) {
    if (!seen.has(id)) {
      missing++
      if (missing <= 5) violate('R1', `never processed: ${id} key=${p.key} n=${p.n}`)
      else violations.R1 = (violations.R1 || 0) + 1
    }
  }

  // --- R2 across instances and lineage: first processing in production order per key ---
  for (const [key, list] of byKey) {
    list.sort((a, b) => a.n - b.n)
    let prev = null
    for (const p of list) {
      const s = seen.get(p.shard + '/' + p.seq)
      if (!s) continue
      if (prev && s.firstT < prev.t) {
        violate(
          'R2',
          `key ${key}: n=${p.n} (${p.shard}) first processed ${((prev.t - s.firstT) / 1000).toFixed(1)} ms ` +
            `before n=${prev.n} (${prev.shard})`
        )
      }
      prev = {t: s.firstT, n: p.n, shard: p.shard}
    }
  }

  // --- duplicates ---
  // Each extra delivery is put down to one cause: a replay by a later instance (from the
  // last checkpoint) after the earlier one was killed / lost its lease / stopped, or a late
  // delivery by an earlier instance that had not yet noticed that its lease had passed on.
  let duplicates = 0
  let uniqueProcessed = 0
  const dupCause = {}
  const endOf = (i) => (i.end === 'lease_lost' ? 'lease lost' : i.end === 'shutdown_requested' ? 'stopped' : i.end || 'killed')
  const deliveries = new Map()  // id -> [{t, inst}] (built only for duplicated records)
  for (const [id, s] of seen) {
    if (byId.has(id)) uniqueProcessed++
    if (s.count > 1) {
      duplicates += s.count - 1
      deliveries.set(id, [])
    }
  }
  for (const i of instances.values()) {
    for (const r of i.records) {
      const d = deliveries.get(r.shard + '/' + r.seq)
      if (d) d.push({t: r.t, inst: i})
    }
  }
  for (const d of deliveries.values()) {
    d.sort((a, b) => a.t - b.t)
    const first = d[0].inst
    for (const x of d.slice(1)) {
      const cause =
        x.inst.initT !== null && first.initT !== null && x.inst.initT < first.initT
          ? 'late delivery by the previous owner'
          : x.inst === first
            ? 'redelivered within an instance'
            : 'replay after ' + endOf(first)
      dupCause[cause] = (dupCause[cause] || 0) + 1
    }
  }

  // --- R4: every instance starts at or after the newest accepted checkpoint before it ---
  const acceptedByShard = new Map()
  for (const c of checkpoints) {
    if (!c.ok || !c.wrote) continue
    if (!acceptedByShard.has(c.shard)) acceptedByShard.set(c.shard, [])
    acceptedByShard.get(c.shard).push(c)
  }
  const pollsByShard = new Map()
  for (const poll of polls) {
    for (const l of poll.leases) {
      if (!pollsByShard.has(l.k)) pollsByShard.set(l.k, [])
      pollsByShard.get(l.k).push({ts: poll.ts || poll.t, t: poll.t, cp: l.cp, sub: l.sub, o: l.o, c: l.c})
    }
  }
  let staleInstances = 0
  for (const i of instances.values()) {
    if (i.initT === null) continue
    let newest = null
    for (const c of acceptedByShard.get(i.shard) || []) {
      if (c.t < i.initT && (!newest || compareExt(c.stored, 0, newest.cp, 0) > 0)) {
        newest = {cp: c.stored, from: c.instId + ' log'}
      }
    }
    for (const p of pollsByShard.get(i.shard) || []) {
      if (p.t < i.initT && (!newest || compareExt(p.cp, p.sub, newest.cp, 0) > 0)) {
        newest = {cp: p.cp, from: 'lease table'}
      }
    }
    if (newest && compareSeq(i.start, newest.cp) < 0) {
      // An instance that never had a write accepted may have been made for a lease stolen
      // a moment before it initialised: its replays are those of a lost lease. One that
      // did write held the lease from an old position: a violation.
      if (i.cps.some((c) => c.ok && c.wrote)) {
        violate('R4', `${i.id} started ${i.shard} at ${i.start}, before checkpoint ${newest.cp} (${newest.from}), and then wrote checkpoints`)
      } else {
        staleInstances++
      }
    }
  }

  // --- R3: polled checkpoints never decrease ---
  for (const [k, list] of pollsByShard) {
    let prev = null
    for (const p of list) {
      if (prev && compareExt(p.cp, p.sub, prev.cp, prev.sub) < 0) {
        violate('R3', `lease ${k}: checkpoint went from ${prev.cp} to ${p.cp} at +${sec(p.t - (meta.t0 || 0))} s`)
      }
      prev = p
    }
  }

  // --- R5: zombie checkpoints ---
  // Evidence that instance P of shard X no longer held the lease: (a) a later instance Q of
  // X (initialised after P) had a checkpoint accepted, or (b) a lease-table read that began
  // after P initialised saw another owner. A checkpoint of P accepted in a call that began
  // after such evidence is a zombie write. (An instance's initialisation alone is no
  // evidence: a worker may initialise a consumer for a lease that was stolen from it a
  // moment before; that consumer's writes are then rejected.)
  const instsByShard = new Map()
  for (const i of instances.values()) {
    if (i.initT === null) continue
    if (!instsByShard.has(i.shard)) instsByShard.set(i.shard, [])
    instsByShard.get(i.shard).push(i)
  }
  let zombieRejected = 0
  for (const c of checkpoints) {
    const p = instances.get(c.instId)
    if (!c.ok && c.code === 'LEASE_LOST') zombieRejected++
    if (!c.ok || !c.wrote || !p || p.initT === null) continue
    let evidence = null
    for (const q of instsByShard.get(c.shard) || []) {
      if (q === p || q.initT <= p.initT) continue
      const w = q.cps.find((x) => x.ok && x.wrote && x.t < c.t0)
      if (w) {
        evidence = `${q.id} had checkpoint ${w.stored} accepted at +${sec(w.t - (meta.t0 || 0))} s`
        break
      }
    }
    if (!evidence) {
      const poll = (pollsByShard.get(c.shard) || []).find(
        (x) => x.ts > p.initT && x.t < c.t0 && x.o && x.o !== p.worker
      )
      if (poll) evidence = `the lease table showed owner ${poll.o} at +${sec(poll.t - (meta.t0 || 0))} s`
    }
    if (evidence) {
      violate(
        'R5',
        `${p.id} (init at +${sec(p.initT - (meta.t0 || 0))} s) had checkpoint ${c.seq} of ${c.shard} accepted ` +
          `in a call at +${sec(c.t0 - (meta.t0 || 0))} s, after ${evidence}`
      )
    }
  }

  // --- R6: no owner after the graceful stop ---
  const ownedAfterStop = finalLeases ? finalLeases.filter((l) => l.o).length : null
  if (finalLeases) {
    for (const l of finalLeases) {
      if (l.o) violate('R6', `lease ${l.k} still owned by ${l.o} after the graceful stop`)
    }
  } else {
    violate('R6', 'the lease table was not read after the stop')
  }

  // --- processes, special cases, fault coverage ---
  const kills = events.filter((e) => e.type === 'kill').length
  const pauses = events.filter((e) => e.type === 'pause').length
  for (const e of events) {
    if (e.type === 'exit' && !e.expected) {
      // Exit 2 with "cannot start": Worker::start() failed (a clear error, yet a fault made
      // a worker unable to start); anything else is a crash.
      const rule = e.code === 2 && /cannot start/.test(e.why || '') ? 'start' : 'crash'
      violate(rule, `worker ${e.worker} exited unexpectedly (code ${e.code}, signal ${e.signal})${e.why ? ': ' + e.why : ''}`)
    }
    if (e.type === 'special' && !e.ok) violate('special', `${e.name}: ${e.detail}`)
  }
  let faultsInjected = 0
  const faultKinds = {}
  if (faults) {
    for (const k of faults.kinds || []) {
      faultKinds[k] = faults.counts[k] || 0
      faultsInjected += faultKinds[k]
    }
    if (meta.requireAllFaults) {
      for (const k of faults.kinds || []) {
        if (!faultKinds[k]) violate('coverage', `fault kind ${k} was never injected`)
      }
      // A short soak's timeline may hold no outage; one that was planned must have happened.
      const outagePlanned = ((meta.options && meta.options.timeline) || []).some((s) => s.do === 'outage')
      if (outagePlanned && !faults.counts.outages) violate('coverage', 'no outage of the emulators was simulated')
      if (!faults.counts.rejected_auth) violate('coverage', 'wrong credentials were never answered')
    }
  }

  // --- timings ---
  const timings = {takeovers: [], children: []}
  const shardEndAt = (k, t) => {
    // Whether lease k held SHARD_END in the last poll before t.
    let last = null
    for (const p of pollsByShard.get(k) || []) {
      if (p.t <= t) last = p
    }
    return last && last.cp === 'SHARD_END'
  }
  for (const e of events.filter((x) => x.type === 'kill' || x.type === 'pause')) {
    const keys = (e.leases || []).filter((k) => !shardEndAt(k, e.t))
    if (!keys.length) {
      timings.takeovers.push({type: e.type, worker: e.worker, shards: 0})
      continue
    }
    // A pause can end before the leader may fence the worker (its last heartbeat may land
    // just before, or, delayed on the way, after the pause began): the worker then finds
    // its hold lapsed and reads its shards again itself, a new incarnation. That is the
    // shard read again too (R7); it is not a takeover, so not in the takeover times.
    const resumed = e.type === 'pause'
      ? events.find((x) => x.type === 'resume' && x.worker === e.worker && x.t > e.t)
      : null
    let worstInit = 0
    let worstRead = 0
    let worstTable = 0
    let allInit = true
    let allRead = true
    let allTable = true
    for (const k of keys) {
      const starts = [...instances.values()].filter((i) => i.shard === k && i.initT !== null && i.initT > e.t)
      const firstInit = starts.filter((i) => i.worker !== e.worker).reduce((m, i) => Math.min(m, i.initT), Infinity)
      const firstRead = starts
        .filter((i) => i.worker !== e.worker || (resumed && i.initT > resumed.t))
        .reduce((m, i) => Math.min(m, i.initT), Infinity)
      if (firstInit === Infinity) allInit = false
      else worstInit = Math.max(worstInit, firstInit - e.t)
      if (firstRead === Infinity) allRead = false
      else worstRead = Math.max(worstRead, firstRead - e.t)
      const firstPoll = (pollsByShard.get(k) || []).find((p) => p.t > e.t && p.o && p.o !== e.worker)
      if (!firstPoll) allTable = false
      else worstTable = Math.max(worstTable, firstPoll.t - e.t)
    }
    timings.takeovers.push({
      type: e.type,
      worker: e.worker,
      shards: keys.length,
      initSeconds: allInit ? worstInit / 1e6 : null,
      readSeconds: allRead ? worstRead / 1e6 : null,
      readBySelf: allRead && !allInit,
      tableSeconds: allTable ? worstTable / 1e6 : null,
    })
  }
  for (const e of events.filter((x) => x.type === 'split' || x.type === 'merge')) {
    let first = Infinity
    let firstInit = Infinity
    for (const c of e.children || []) {
      for (const i of instances.values()) {
        if (i.shard !== c) continue
        if (i.initT !== null) firstInit = Math.min(firstInit, i.initT)
        if (i.records.length) first = Math.min(first, i.records[0].t)
      }
    }
    timings.children.push({
      type: e.type,
      parents: e.parents,
      children: e.children,
      firstInitSeconds: firstInit === Infinity ? null : (firstInit - e.t) / 1e6,
      firstRecordSeconds: first === Infinity ? null : (first - e.t) / 1e6,
    })
  }

  // --- R7: liveness within the bound ---
  const boundS = meta.options && meta.options.takeoverBoundS
  let silentOwners = 0
  let longestUnreadUs = 0
  if (boundS) {
    const boundUs = boundS * 1e6
    for (const t of timings.takeovers) {
      if (t.shards && (t.readSeconds == null || t.readSeconds > boundS)) {
        violate('R7', `after the ${t.type} of ${t.worker}, its shards were read again only after ` +
          `${t.readSeconds == null ? 'never' : t.readSeconds.toFixed(1) + ' s'} (bound ${boundS} s)`)
      }
    }
    const unreadS = (meta.options && meta.options.unreadBoundS) || boundS
    ;({silent: silentOwners, longestUs: longestUnreadUs} = checkLiveOwnersRead(
      events, polls, instances, unreadS * 1e6, (msg) => violate('R7', msg)))
  }

  const violationCount = Object.values(violations).reduce((a, b) => a + b, 0)
  return {
    produced: produced.length,
    processed: processedLines,
    uniqueProcessed,
    missing,
    duplicates,
    duplicateCauses: dupCause,
    gaps,
    instances: instances.size,
    workerProcesses: starts.length,
    checkpointsAccepted: checkpoints.filter((c) => c.ok && c.wrote).length,
    checkpointsFailed: checkpoints.filter((c) => !c.ok).length,
    zombieCheckpointsRejected: zombieRejected,
    batchesAfterLeaseLost: afterLost.batches,
    recordsAfterLeaseLost: afterLost.records,
    ownedAfterStop,
    staleInstances,
    kills,
    pauses,
    splits: events.filter((e) => e.type === 'split').length,
    merges: events.filter((e) => e.type === 'merge').length,
    outages: events.filter((e) => e.type === 'outage').length,
    faultsInjected,
    faultKinds,
    faultCounts: faults ? faults.counts : null,
    leasePolls: polls.length,
    violations,
    violationCount,
    examples,
    timings,
    takeoverBoundS: boundS || null,
    unreadBoundS: boundS ? (meta.options && meta.options.unreadBoundS) || boundS : null,
    silentOwners,
    longestUnreadS: Math.round(longestUnreadUs / 1e5) / 10,
    specials: events.filter((e) => e.type === 'special'),
  }
}

// When each worker was live (running and not paused), from the runner's events: worker ->
// [[from, to]] in microseconds; the graceful stop (the drain's end) ends every interval.
function liveIntervals(events) {
  const out = new Map()
  const open = new Map()
  const stopAt = (events.find((e) => e.type === 'drain') || {}).t || Infinity
  const begin = (w, t) => open.set(w, t)
  const end = (w, t) => {
    if (!open.has(w)) return
    if (!out.has(w)) out.set(w, [])
    out.get(w).push([open.get(w), Math.min(t, stopAt)])
    open.delete(w)
  }
  for (const e of events) {
    if (e.type === 'start' || e.type === 'resume') begin(e.worker, e.t)
    else if (e.type === 'kill' || e.type === 'pause' || e.type === 'exit') end(e.worker, e.t)
  }
  for (const w of [...open.keys()]) end(w, stopAt)
  return out
}

// R7's second half: every stretch of lease-table polls in which a lease is owned by a live
// worker (no handoff pending, not at SHARD_END, parents finished) and which lasts longer than
// the bound must see that worker start a processor for the shard within the bound, and, once
// it read the shard, never go longer than the bound without a processor of it. Returns
// the number of stretches that did not, and the longest time (at the polls' resolution) a
// lease owned by a live worker went without a processor of that worker reading it.
function checkLiveOwnersRead(events, polls, instances, boundUs, violate) {
  const live = liveIntervals(events)
  const liveSince = (w, t) => {
    for (const [a, b] of live.get(w) || []) if (a <= t && t < b) return a
    return null
  }
  const inits = new Map()  // "worker shard" -> [initT]
  for (const i of instances.values()) {
    if (i.initT == null) continue
    const k = i.worker + ' ' + i.shard
    if (!inits.has(k)) inits.set(k, [])
    inits.get(k).push({initT: i.initT, endT: i.endT == null ? Infinity : i.endT})
  }
  const streaks = new Map()  // shard -> {owner, since, reported}
  let silent = 0
  let longest = 0
  for (const poll of polls) {
    const byKey = new Map(poll.leases.map((l) => [l.k, l]))
    for (const l of poll.leases) {
      const parentsDone = (l.p || []).every((p) => !byKey.has(p) || byKey.get(p).cp === 'SHARD_END')
      const since = l.o && !l.to && l.cp !== 'SHARD_END' && parentsDone ? liveSince(l.o, poll.ts) : null
      let s = streaks.get(l.k)
      if (since == null) {
        streaks.delete(l.k)
        continue
      }
      if (!s || s.owner !== l.o || s.liveSince !== since) {
        s = {owner: l.o, since: Math.max(poll.ts, since), liveSince: since, reported: false}
        streaks.set(l.k, s)
      }
      // How long the owner has not been reading it (from the stretch's start, or from when
      // its processor ended while the table still gave it the lease).
      const reading = (inits.get(l.o + ' ' + l.k) || []).some(
        (i) => i.initT >= s.liveSince && i.initT <= poll.ts && i.endT >= poll.ts)
      if (reading) {
        s.unreadSince = null
        s.gapReported = false
      } else {
        if (s.unreadSince == null) s.unreadSince = s.everRead ? poll.ts : s.since
        longest = Math.max(longest, poll.ts - s.unreadSince)
        // A processor that read the shard and ended while the table still gave the lease to
        // its live worker: that worker must read it again within the bound too (a lease
        // dropped locally but kept in the table, say), not only start reading once.
        if (s.everRead && !s.gapReported && poll.ts - s.unreadSince > boundUs) {
          s.gapReported = true
          silent++
          violate(`${l.k} was ${l.o}'s in the lease table while ${l.o} was live, and ${l.o} ` +
            `stopped reading it for ${((poll.ts - s.unreadSince) / 1e6).toFixed(1)} s ` +
            `(more than ${(boundUs / 1e6).toFixed(0)} s)`)
        }
      }
      s.everRead = s.everRead || reading
      if (s.reported || poll.ts - s.since <= boundUs) continue
      // Read when a processor of that worker process for the shard was running at the start
      // of the stretch, or started within the bound of it.
      const started = (inits.get(l.o + ' ' + l.k) || []).some(
        (i) => i.initT >= s.liveSince && i.initT <= s.since + boundUs && i.endT >= s.since)
      if (!started) {
        s.reported = true
        silent++
        violate(`${l.k} was ${l.o}'s in the lease table for ${((poll.ts - s.since) / 1e6).toFixed(1)} s ` +
          `while ${l.o} was live, and ${l.o} did not start reading it within ${(boundUs / 1e6).toFixed(0)} s`)
      }
    }
  }
  return {silent, longestUs: longest}
}

function summaryLine(profile, r, seconds) {
  return (
    `scenario ${profile}: produced=${r.produced} processed=${r.processed} (unique ${r.uniqueProcessed}) ` +
    `duplicates=${r.duplicates} kills=${r.kills} pauses=${r.pauses} splits=${r.splits} merges=${r.merges} ` +
    `outages=${r.outages} faults=${r.faultsInjected} violations=${r.violationCount}` +
    (seconds != null ? ` time=${seconds.toFixed(0)}s` : '') +
    ` ${r.violationCount ? 'FAIL' : 'PASS'}`
  )
}

module.exports = {check, summaryLine}

if (require.main === module) {
  const dir = process.argv[2]
  if (!dir) {
    process.stderr.write('usage: node checker.js RUN_DIR\n')
    process.exit(2)
  }
  const r = check(dir)
  const meta = readJson(path.join(dir, 'meta.json'), {})
  process.stdout.write(JSON.stringify(r, null, 2) + '\n')
  process.stdout.write(summaryLine(meta.profile || '?', r) + '\n')
  process.exit(r.violationCount ? 1 : 0)
}
