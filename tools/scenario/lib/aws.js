// Minimal AWS JSON-protocol client for the scenario runner's own control traffic (stream
// setup, producer, lease-table polling). It talks straight to the emulators (never through
// the fault proxy) and does not sign: kinesalite and dynalite only check that an
// Authorization header of the right shape is present.
'use strict'

const http = require('http')

const agent = new http.Agent({keepAlive: true, maxSockets: 8})

class AwsError extends Error {
  constructor(status, type, message) {
    super(`${type || 'HTTP ' + status}: ${message || ''}`)
    this.status = status
    this.type = type
  }
}

function amzDate() {
  return new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '')
}

// One JSON call: resolves to the parsed body, rejects with AwsError (or a socket error).
function call(endpoint, target, version, body, {timeoutMs = 20000, accessKey = 'AKIDSCENARIO'} = {}) {
  const u = new URL(endpoint)
  const payload = Buffer.from(JSON.stringify(body))
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        method: 'POST',
        path: '/',
        agent,
        headers: {
          'Content-Type': 'application/x-amz-json-' + version,
          'X-Amz-Target': target,
          'Content-Length': payload.length,
          'X-Amz-Date': amzDate(),
          Authorization:
            `AWS4-HMAC-SHA256 Credential=${accessKey}/20240101/us-east-1/svc/aws4_request, ` +
            'SignedHeaders=host;x-amz-date, Signature=0000',
        },
      },
      (res) => {
        const chunks = []
        res.on('data', (c) => chunks.push(c))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString()
          let parsed = {}
          try {
            parsed = text ? JSON.parse(text) : {}
          } catch (e) {
            return reject(new AwsError(res.statusCode, 'BadJson', text.slice(0, 200)))
          }
          if (res.statusCode >= 300) {
            const type = String(parsed.__type || '').split('#').pop()
            return reject(new AwsError(res.statusCode, type, parsed.message || parsed.Message))
          }
          resolve(parsed)
        })
        res.on('error', reject)
      }
    )
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${target}: timed out after ${timeoutMs} ms`)))
    req.on('error', reject)
    req.end(payload)
  })
}

const kinesis = (endpoint, op, body, opts) => call(endpoint, 'Kinesis_20131202.' + op, '1.1', body, opts)
const dynamodb = (endpoint, op, body, opts) => call(endpoint, 'DynamoDB_20120810.' + op, '1.0', body, opts)

// Every item of a table (Scan with paging), as plain objects {attr: value} where S/N/B stay
// strings and SS stays an array.
async function scanAll(endpoint, table) {
  const items = []
  let start
  do {
    const body = {TableName: table, ConsistentRead: true}
    if (start) body.ExclusiveStartKey = start
    const r = await dynamodb(endpoint, 'Scan', body)
    for (const it of r.Items || []) items.push(plain(it))
    start = r.LastEvaluatedKey
  } while (start)
  return items
}

function plain(item) {
  const out = {}
  for (const [k, v] of Object.entries(item)) {
    if ('S' in v) out[k] = v.S
    else if ('N' in v) out[k] = v.N
    else if ('SS' in v) out[k] = v.SS
    else if ('B' in v) out[k] = v.B
    else if ('BOOL' in v) out[k] = v.BOOL
    else if ('NULL' in v) out[k] = null
    else out[k] = v
  }
  return out
}

// Sequence numbers and sentinels in checkpoint order: TRIM_HORIZON / LATEST / AT_TIMESTAMP
// < any sequence number < SHARD_END. Numbers compare as decimals (by length, then text).
function seqRank(s) {
  if (s === 'SHARD_END') return 2
  if (/^\d+$/.test(s || '')) return 1
  return 0
}
function compareSeq(a, b) {
  const ra = seqRank(a)
  const rb = seqRank(b)
  if (ra !== rb) return ra - rb
  if (ra !== 1) return 0
  const x = a.replace(/^0+(?=\d)/, '')
  const y = b.replace(/^0+(?=\d)/, '')
  if (x.length !== y.length) return x.length - y.length
  return x < y ? -1 : x > y ? 1 : 0
}
// (seq, sub) pairs.
function compareExt(a, asub, b, bsub) {
  const c = compareSeq(a, b)
  if (c !== 0) return c
  return (Number(asub) || 0) - (Number(bsub) || 0)
}

module.exports = {call, kinesis, dynamodb, scanAll, compareSeq, compareExt, AwsError, agent}
