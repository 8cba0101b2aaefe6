// Checker self-test: takes a clean run directory, makes copies with one planted fault each
// (a lost record, a skipped record, two records swapped, a child read before its parent, a
// decreasing checkpoint, an instance resuming before the last checkpoint, a zombie
// checkpoint, a lease left owned, a lease a live worker never reads, a paused worker's shard
// nobody reads again, a crash) and checks that the checker reports each one
// under the right rule. Run by the short and soak profiles after a passing run, so a
// checker that has gone blind fails the suite.
//
//   node tools/scenario/checker_selftest.js RUN_DIR
'use strict'

const fs = require('fs')
const os = require('os')
const path = require('path')
const {check} = require('./checker')
const {compareSeq} = require('./lib/aws')

function copyDir(src, dst) {
  fs.mkdirSync(dst, {recursive: true})
  for (const e of fs.readdirSync(src, {withFileTypes: true})) {
    const s = path.join(src, e.name)
    const d = path.join(dst, e.name)
    if (e.isDirectory()) copyDir(s, d)
    else fs.copyFileSync(s, d)
  }
}

const readLines = (f) => fs.readFileSync(f, 'utf8').split('\n').filter(Boolean)
const writeLines = (f, lines) => fs.writeFileSync(f, lines.map((l) => l + '\n').join(''))

function workerLogs(dir) {
  const w = path.join(dir, 'workers')
  return fs.readdirSync(w).filter((f) => f.endsWith('.log')).map((f) => path.join(w, f))
}

// Instances with their record line numbers: {file, id, shard, lines: [i], init}
function instances(dir) {
  const out = new Map()
  for (const f of workerLogs(dir)) {
    readLines(f).forEach((l, i) => {
      const e = JSON.parse(l)
      if (e.inst === undefined) return
      const id = e.worker + '#' + e.inst
      if (!out.has(id)) out.set(id, {file: f, id, shard: e.shard, lines: [], init: null})
      const x = out.get(id)
      if (e.event === 'init') x.init = e
      else if (e.event === undefined) x.lines.push(i)
    })
  }
  return [...out.values()]
}

const mutations = {
  // One produced record never processed.
  R1(dir) {
    const produced = readLines(path.join(dir, 'produced.jsonl')).map(JSON.parse)
    const victim = produced[Math.floor(produced.length / 2)]
    for (const f of workerLogs(dir)) {
      writeLines(f, readLines(f).filter((l) => {
        const e = JSON.parse(l)
        return !(e.event === undefined && e.shard === victim.shard && e.seq === victim.seq)
      }))
    }
  },
  // A record skipped inside an instance (processed elsewhere, so only the gap shows).
  R2gap(dir) {
    const i = instances(dir).find((x) => x.lines.length > 10)
    const lines = readLines(i.file)
    lines.splice(i.lines[5], 1)
    writeLines(i.file, lines)
  },
  // Two consecutive records of an instance swapped.
  R2swap(dir) {
    const i = instances(dir).find((x) => x.lines.length > 10)
    const lines = readLines(i.file)
    const a = i.lines[3]
    const b = i.lines[4]
    ;[lines[a], lines[b]] = [lines[b], lines[a]]
    writeLines(i.file, lines)
  },
  // A child shard's first batch processed (by the clock) before its parent's last one.
  R2lineage(dir) {
    const events = readLines(path.join(dir, 'events.jsonl')).map(JSON.parse)
    const split = events.find((e) => e.type === 'split' || e.type === 'merge')
    const child = instances(dir).find((x) => split.children.includes(x.shard) && x.lines.length)
    const lines = readLines(child.file)
    const first = JSON.parse(lines[child.lines[0]])
    for (const n of child.lines) {
      const e = JSON.parse(lines[n])
      if (e.t !== first.t) break
      e.t = split.t - 30e6
      lines[n] = JSON.stringify(e)
    }
    writeLines(child.file, lines)
  },
  // A lease's checkpoint moves backwards in the polls.
  R3(dir) {
    const f = path.join(dir, 'leases.jsonl')
    const polls = readLines(f).map(JSON.parse)
    const last = polls[polls.length - 1]
    const l = last.leases.find((x) => /^\d+$/.test(x.cp) || x.cp === 'SHARD_END')
    polls.push({t: last.t + 1000, leases: last.leases.map((x) => (x === l ? {...x, cp: 'TRIM_HORIZON'} : x))})
    writeLines(f, polls.map((p) => JSON.stringify(p)))
  },
  // An instance resumes from TRIM_HORIZON although a checkpoint had been written.
  R4(dir) {
    const wrote = (x) => readLines(x.file).some((l) => {
      const e = JSON.parse(l)
      return e.event === 'checkpoint' && e.worker + '#' + e.inst === x.id && e.ok && e.wrote
    })
    const i = instances(dir).find((x) => x.init && /^\d+$/.test(x.init.start) && wrote(x))
    const lines = readLines(i.file)
    const n = lines.findIndex((l) => {
      const e = JSON.parse(l)
      return e.event === 'init' && e.worker + '#' + e.inst === i.id
    })
    const e = JSON.parse(lines[n])
    e.start = 'TRIM_HORIZON'
    lines[n] = JSON.stringify(e)
    writeLines(i.file, lines)
  },
  // A superseded instance has a checkpoint accepted after the new owner's first one.
  R5(dir) {
    const all = instances(dir).filter((x) => x.init)
    const firstWrite = (x) => {
      for (const l of readLines(x.file)) {
        const e = JSON.parse(l)
        if (e.event === 'checkpoint' && e.worker + '#' + e.inst === x.id && e.ok && e.wrote) return e
      }
      return null
    }
    for (const p of all) {
      for (const q of all) {
        if (q === p || q.shard !== p.shard || q.init.t <= p.init.t) continue
        const w = firstWrite(q)
        if (!w) continue
        const lines = readLines(p.file)
        lines.push(JSON.stringify({event: 'checkpoint', shard: p.shard, seq: w.seq, sub: 0, stored: w.seq, ok: true,
          wrote: true, code: 'OK', t0: w.t + 1000, inst: p.init.inst, worker: p.init.worker, t: w.t + 2000}))
        writeLines(p.file, lines)
        return
      }
    }
    throw new Error('no shard changed hands in this run')
  },
  // A lease still owned after the graceful stop.
  R6(dir) {
    const f = path.join(dir, 'final_leases.json')
    const leases = JSON.parse(fs.readFileSync(f, 'utf8'))
    leases[0].o = 'w9'
    fs.writeFileSync(f, JSON.stringify(leases))
  },
  // A live worker that owns a lease and never reads it: the longest-reading processor's
  // start (and its records) taken out of its log, as if the worker had not noticed the lease.
  R7(dir) {
    const longest = instances(dir).filter((x) => x.init).sort((a, b) => b.lines.length - a.lines.length)[0]
    if (!longest) throw new Error('no instance to silence')
    const [worker] = longest.id.split('#')
    writeLines(longest.file, readLines(longest.file).filter((l) => {
      const e = JSON.parse(l)
      return !(e.worker === worker && e.shard === longest.shard)
    }))
  },
  // A paused worker whose shard nobody read again, not even the worker once it resumed: a
  // pause of the owner of a lease not at SHARD_END, after every processor of its shard began.
  R7pause(dir) {
    const polls = readLines(path.join(dir, 'leases.jsonl')).map(JSON.parse)
    const owned = polls.flatMap((p) => p.leases.filter((l) => l.o && l.cp !== 'SHARD_END').map((l) => ({p, l})))
    if (!owned.length) throw new Error('no owned lease in the polls')
    const {p, l} = owned[owned.length - 1]
    const lastInit = instances(dir).filter((x) => x.init && x.shard === l.k).reduce((m, x) => Math.max(m, x.init.t), 0)
    const t = Math.max(p.t, lastInit) + 1
    fs.appendFileSync(path.join(dir, 'events.jsonl'),
      JSON.stringify({t, type: 'pause', worker: l.o, leases: [l.k], ms: 4000}) + '\n' +
      JSON.stringify({t: t + 4e6, type: 'resume', worker: l.o}) + '\n')
  },
  // A worker that crashed.
  crash(dir) {
    fs.appendFileSync(path.join(dir, 'events.jsonl'),
      JSON.stringify({t: Date.now() * 1000, type: 'exit', worker: 'w1', code: null, signal: 'SIGSEGV', expected: false}) + '\n')
  },
}

const expectedRule = {R1: 'R1', R2gap: 'R2', R2swap: 'R2', R2lineage: 'R2', R3: 'R3', R4: 'R4', R5: 'R5', R6: 'R6', R7: 'R7', R7pause: 'R7', crash: 'crash'}

function selftest(runDir) {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'kcl-checker-selftest-'))
  const results = []
  try {
    for (const [name, mutate] of Object.entries(mutations)) {
      const dir = path.join(base, name)
      copyDir(runDir, dir)
      let detected = false
      let note = ''
      try {
        mutate(dir)
        const r = check(dir)
        detected = (r.violations[expectedRule[name]] || 0) > 0
        note = JSON.stringify(r.violations)
      } catch (e) {
        note = 'could not plant: ' + e.message
      }
      results.push({name, detected, note})
      fs.rmSync(dir, {recursive: true, force: true})
    }
  } finally {
    fs.rmSync(base, {recursive: true, force: true})
  }
  return results
}

module.exports = {selftest}

if (require.main === module) {
  const dir = process.argv[2]
  if (!dir) {
    process.stderr.write('usage: node checker_selftest.js RUN_DIR\n')
    process.exit(2)
  }
  const results = selftest(dir)
  for (const r of results) process.stdout.write(`${r.detected ? 'detected' : 'MISSED  '} ${r.name}: ${r.note}\n`)
  const missed = results.filter((r) => !r.detected).length
  process.stdout.write(`checker self-test: ${results.length - missed}/${results.length} planted violations detected\n`)
  process.exit(missed ? 1 : 0)
}
