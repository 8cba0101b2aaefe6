// Fault-injecting HTTP proxy between kcl-cpp workers and the emulators (a test tool).
//
// One listener per upstream service (kinesis, dynamodb) on 127.0.0.1, forwarding every
// request to the emulator. Per request, chosen by a seeded PRNG with probabilities per
// service and per operation (the X-Amz-Target header), it injects one of these faults:
//
//   error500            500 InternalFailure (Kinesis) / InternalServerError (DynamoDB), JSON
//                       body and x-amzn-ErrorType; the request is not forwarded
//   throughput          400 ProvisionedThroughputExceededException; not forwarded
//   throttling          400 ThrottlingException; not forwarded
//   latency             forwards after an added delay (latencyMs range)
//   drop                destroys the connection before forwarding (nothing applied)
//   drop_after          forwards, lets the upstream apply it, then destroys the connection
//                       without an answer (a write that happened but looks failed)
//   stall               holds the request stallMs (longer than the client's request timeout)
//                       before forwarding; the client normally gives up first
//   truncated           forwards, then sends the status line and headers with the full
//                       Content-Length but only half the body, and closes the connection
//   invalid_json        forwards, then answers 200 with a body that is not JSON
//   wrong_content_type  forwards, then answers 200 text/html (a load balancer's page)
//
// The four kinds that forward first (drop_after, truncated, invalid_json,
// wrong_content_type) are applied writes with a broken answer: for DynamoDB UpdateItem the
// lease or checkpoint update did happen although the worker sees a failure.
//
// Besides random faults: `forced` lists faults injected once each, at the first matching
// requests after enable() (spaced by forcedSpacingMs), so a short run exercises every kind;
// rejectAccessKeys answers 400 UnrecognizedClientException to requests signed with those
// access key ids (the emulators accept any signature, so wrong credentials can only be
// simulated here); outage(ms) closes the listeners and every open connection, refuses
// connections for ms, then listens again on the same ports (the emulators going away and
// coming back).
//
// The runner's own control traffic (create stream, producer, lease-table polling) goes to
// the emulators directly and is never faulted.
//
// Use as a module: const p = await startFaultProxy({kinesis: url, dynamodb: url}, opts);
// p.urls, p.enable(), p.disable(), p.outage(ms), p.counts(), p.close().
// Or standalone: node fault_proxy.js --kinesis URL --dynamodb URL [--seed N] [--p 0.02]
// prints {"kinesis":url,"dynamodb":url} and runs until stdin closes.
'use strict'

const http = require('http')
const proxyHttp = require('./lib/proxy_http')

const KINDS = [
  'error500',
  'throughput',
  'throttling',
  'latency',
  'drop',
  'drop_after',
  'stall',
  'truncated',
  'invalid_json',
  'wrong_content_type',
]

// mulberry32: small, seedable, good enough for choosing faults.
function prng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function errorBody(service, type, message) {
  const prefix = service === 'dynamodb' ? 'com.amazonaws.dynamodb.v20120810#' : ''
  return JSON.stringify({__type: prefix + type, message})
}

// opts:
//   seed (number), rates: {default: {kind: p}, 'kinesis.GetRecords': {kind: p}, ...}
//   (a rule for "service.Op" replaces the service rule "service" which replaces default;
//   "dynamodb.coordination" applies to every call on a table whose name ends in
//   "-CoordinatorState", the coordination table of leader-based assignment, before any other),
//   forced: [{kind, service?, op?}], forcedSpacingMs, latencyMs: [min, max], stallMs,
//   rejectAccessKeys: [ids], enabled (default false), log(line) optional.
async function startFaultProxy(upstreams, opts = {}) {
  const rand = prng(opts.seed == null ? 1 : opts.seed)
  const rates = opts.rates || {}
  const latencyMs = opts.latencyMs || [100, 600]
  const stallMs = opts.stallMs || 4000
  const forced = (opts.forced || []).map((f) => ({...f}))
  const forcedSpacingMs = opts.forcedSpacingMs == null ? 300 : opts.forcedSpacingMs
  const rejectKeys = new Set(opts.rejectAccessKeys || [])
  const log = opts.log || (() => {})
  let enabled = !!opts.enabled
  let lastForcedAt = 0
  const counts = {requests: 0, forwarded: 0, rejected_auth: 0, outages: 0}
  for (const k of KINDS) counts[k] = 0
  const perOp = {}  // "service.Op.kind" -> n
  const agent = new http.Agent({keepAlive: true, maxSockets: 64})

  function ratesFor(service, op, table) {
    if (table && /-CoordinatorState$/.test(table) && rates[service + '.coordination']) {
      return rates[service + '.coordination']
    }
    return rates[service + '.' + op] || rates[service] || rates.default || {}
  }

  function choose(service, op, table) {
    if (!enabled) return null
    const now = Date.now()
    if (forced.length && now - lastForcedAt >= forcedSpacingMs) {
      const i = forced.findIndex(
        (f) => (!f.service || f.service === service) && (!f.op || f.op === op)
      )
      if (i >= 0) {
        lastForcedAt = now
        return forced.splice(i, 1)[0].kind
      }
    }
    const r = ratesFor(service, op, table)
    let x = rand()
    for (const kind of KINDS) {
      const p = r[kind] || 0
      if (x < p) return kind
      x -= p
    }
    return null
  }

  function makeServer(service, upstream) {
    const up = new URL(upstream)
    const {server, sockets} = proxyHttp.bufferingServer((req, res, body) => handle(service, up, req, res, body))
    return {service, server, sockets, port: 0}
  }

  const forward = (up, req, body, cb) => proxyHttp.forward(agent, up, req, body, cb)
  const reply = proxyHttp.reply

  function respondError(res, service, status, type, message) {
    const body = Buffer.from(errorBody(service, type, message))
    reply(
      res,
      status,
      {
        'content-type': service === 'dynamodb' ? 'application/x-amz-json-1.0' : 'application/x-amz-json-1.1',
        'x-amzn-errortype': type,
        'x-amzn-requestid': 'fault-proxy-' + counts.requests,
      },
      body
    )
  }

  function handle(service, up, req, res, body) {
    counts.requests++
    const target = String(req.headers['x-amz-target'] || '')
    const op = target.split('.').pop() || '?'
    const auth = String(req.headers.authorization || '')
    const m = /Credential=([^/,\s]+)/.exec(auth)
    if (m && rejectKeys.has(m[1])) {
      counts.rejected_auth++
      return respondError(
        res,
        service,
        400,
        'UnrecognizedClientException',
        'The security token included in the request is invalid.'
      )
    }
    const table = service === 'dynamodb' ? (/"TableName"\s*:\s*"([^"]+)"/.exec(body.toString('utf8', 0, 4096)) || [])[1] : null
    const kind = choose(service, op, table)
    if (kind) {
      counts[kind]++
      const key = `${service}.${op}.${kind}`
      perOp[key] = (perOp[key] || 0) + 1
      log(`fault ${kind} on ${service}.${op}`)
    }
    const pass = () =>
      forward(up, req, body, (err, status, headers, rbody) => {
        if (err) {
          res.destroy()
          return
        }
        counts.forwarded++
        reply(res, status, headers, rbody)
      })
    switch (kind) {
      case null:
        return pass()
      case 'error500':
        return respondError(
          res,
          service,
          500,
          service === 'dynamodb' ? 'InternalServerError' : 'InternalFailure',
          'injected by the fault proxy'
        )
      case 'throughput':
        return respondError(
          res,
          service,
          400,
          'ProvisionedThroughputExceededException',
          'Rate exceeded (injected by the fault proxy)'
        )
      case 'throttling':
        return respondError(res, service, 400, 'ThrottlingException', 'Rate exceeded (injected by the fault proxy)')
      case 'latency': {
        const d = latencyMs[0] + Math.floor(rand() * (latencyMs[1] - latencyMs[0]))
        return setTimeout(pass, d)
      }
      case 'drop':
        return req.socket.destroy()
      case 'stall': {
        const timer = setTimeout(() => {
          if (!res.destroyed && !req.socket.destroyed) pass()
        }, stallMs)
        req.socket.once('close', () => clearTimeout(timer))
        return
      }
      default:
        // Forward first: the upstream applies the request; the answer is then broken.
        return forward(up, req, body, (err, status, headers, rbody) => {
          if (err) return res.destroy()
          counts.forwarded++
          if (kind === 'drop_after') return req.socket.destroy()
          if (kind === 'truncated') {
            const h = {...headers}
            delete h['transfer-encoding']
            h['content-length'] = rbody.length
            res.writeHead(status, h)
            res.write(rbody.subarray(0, Math.floor(rbody.length / 2)))
            return setTimeout(() => req.socket.destroy(), 20)
          }
          if (kind === 'invalid_json') {
            return reply(
              res,
              200,
              {
                'content-type': service === 'dynamodb' ? 'application/x-amz-json-1.0' : 'application/x-amz-json-1.1',
              },
              Buffer.from('{"Records": [{"Data": "not json' + rbody.toString().slice(0, 40).replace(/"/g, "'"))
            )
          }
          // wrong_content_type
          return reply(
            res,
            200,
            {'content-type': 'text/html'},
            Buffer.from('<html><head><title>502 Bad Gateway</title></head><body>upstream</body></html>\n')
          )
        })
    }
  }

  const servers = [makeServer('kinesis', upstreams.kinesis), makeServer('dynamodb', upstreams.dynamodb)]
  const listen = (s) =>
    new Promise((resolve, reject) => {
      s.server.once('error', reject)
      s.server.listen(s.port, '127.0.0.1', () => {
        s.server.removeListener('error', reject)
        s.port = s.server.address().port
        resolve()
      })
    })
  for (const s of servers) await listen(s)
  const urls = {}
  for (const s of servers) urls[s.service] = 'http://127.0.0.1:' + s.port

  let outageTimer = null
  const api = {
    urls,
    kinds: KINDS,
    enable() {
      enabled = true
    },
    disable() {
      enabled = false
    },
    enabled: () => enabled,
    forcedLeft: () => forced.length,
    // Refuse connections for `ms`, then listen again on the same ports. Resolves when back.
    outage(ms) {
      counts.outages++
      return new Promise((resolve) => {
        for (const s of servers) {
          s.server.close()
          for (const sock of s.sockets) sock.destroy()
        }
        outageTimer = setTimeout(async () => {
          outageTimer = null
          for (const s of servers) {
            // A fresh server: a closed one cannot listen again on Node < 19 reliably.
            const fresh = makeServer(s.service, s.service === 'kinesis' ? upstreams.kinesis : upstreams.dynamodb)
            fresh.port = s.port
            Object.assign(s, {server: fresh.server, sockets: fresh.sockets})
            for (let attempt = 0; ; attempt++) {
              try {
                await listen(s)
                break
              } catch (e) {
                if (attempt > 50) throw e
                await new Promise((r) => setTimeout(r, 100))
              }
            }
          }
          resolve()
        }, ms)
      })
    },
    counts() {
      return {...counts, perOp: {...perOp}}
    },
    close() {
      if (outageTimer) clearTimeout(outageTimer)
      for (const s of servers) {
        s.server.close()
        for (const sock of s.sockets) sock.destroy()
      }
      agent.destroy()
    },
  }
  return api
}

module.exports = {startFaultProxy, KINDS, prng}

if (require.main === module) {
  const args = process.argv.slice(2)
  const get = (name, dflt) => {
    const i = args.indexOf(name)
    return i >= 0 ? args[i + 1] : dflt
  }
  const p = Number(get('--p', '0.02'))
  const rate = {}
  for (const k of KINDS) rate[k] = p / KINDS.length
  startFaultProxy(
    {kinesis: get('--kinesis'), dynamodb: get('--dynamodb')},
    {seed: Number(get('--seed', '1')), rates: {default: rate}, enabled: true, stallMs: Number(get('--stall-ms', '4000'))}
  ).then((proxy) => {
    process.stdout.write(JSON.stringify(proxy.urls) + '\n')
    const bye = () => {
      process.stderr.write(JSON.stringify(proxy.counts()) + '\n')
      process.exit(0)
    }
    process.stdin.on('end', bye)
    process.stdin.on('close', bye)
    process.stdin.resume()
    process.on('SIGTERM', bye)
    process.on('SIGINT', bye)
  })
}
