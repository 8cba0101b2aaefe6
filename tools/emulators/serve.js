#!/usr/bin/env node
// Starts kinesalite and/or dynalite on 127.0.0.1 (ephemeral ports unless given), prints one
// JSON line {"kinesis":"http://127.0.0.1:P1","dynamodb":"http://127.0.0.1:P2"} on stdout
// once both listen, and exits when stdin closes (the parent died or let go of the pipe),
// on SIGTERM / SIGINT, or when a server fails.
//
// Usage: node serve.js [--kinesis] [--dynamodb] [--kinesis-port N] [--dynamodb-port N]
//                      [--shard-limit N] [--ignore-stdin]
// --shard-limit: kinesalite's limit on the shards of all streams together (default 200).
// With neither --kinesis nor --dynamodb, both are started. NODE_PATH or KCL_NODE_MODULES
// may point at the node_modules folder holding kinesalite and dynalite; by default the
// repository's node_modules is used.
'use strict'

const path = require('path')

function parseArgs(argv) {
  const opts = {kinesis: false, dynamodb: false, kinesisPort: 0, dynamodbPort: 0, ignoreStdin: false,
                shardLimit: 200}
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const num = () => {
      const v = Number(argv[++i])
      if (!Number.isInteger(v) || v < 0 || v > 65535) fail('bad port after ' + a)
      return v
    }
    if (a === '--kinesis') opts.kinesis = true
    else if (a === '--dynamodb') opts.dynamodb = true
    else if (a === '--kinesis-port') opts.kinesisPort = num()
    else if (a === '--dynamodb-port') opts.dynamodbPort = num()
    else if (a === '--ignore-stdin') opts.ignoreStdin = true
    else if (a === '--shard-limit') {
      opts.shardLimit = Number(argv[++i])
      if (!Number.isInteger(opts.shardLimit) || opts.shardLimit < 1) fail('bad --shard-limit')
    }
    else fail('unknown argument: ' + a)
  }
  if (!opts.kinesis && !opts.dynamodb) opts.kinesis = opts.dynamodb = true
  return opts
}

function fail(msg) {
  process.stderr.write('serve.js: ' + msg + '\n')
  process.exit(2)
}

function load(name) {
  const dirs = []
  if (process.env.KCL_NODE_MODULES) dirs.push(process.env.KCL_NODE_MODULES)
  dirs.push(path.join(__dirname, '..', '..', 'node_modules'))
  for (const d of dirs) {
    try {
      return require(path.join(d, name))
    } catch (e) {
      if (e.code !== 'MODULE_NOT_FOUND') throw e
    }
  }
  return require(name)  // NODE_PATH / global
}

function listen(server, port) {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => {
      server.removeListener('error', reject)
      resolve('http://127.0.0.1:' + server.address().port)
    })
  })
}

async function main() {
  const opts = parseArgs(process.argv.slice(2))
  const servers = []
  const out = {}

  const shutdown = (code) => {
    // Exit now: in-memory data does not need flushing and open keep-alive connections
    // would delay server.close().
    process.exit(code)
  }
  process.on('SIGTERM', () => shutdown(0))
  process.on('SIGINT', () => shutdown(0))
  process.on('SIGHUP', () => shutdown(0))
  if (!opts.ignoreStdin) {
    process.stdin.on('end', () => shutdown(0))
    process.stdin.on('close', () => shutdown(0))
    process.stdin.on('error', () => shutdown(0))
    process.stdin.on('data', () => {})  // consume and ignore anything written
    process.stdin.resume()
  }
  // stdout going away (parent closed its read end) must not crash with EPIPE noise.
  process.stdout.on('error', () => {})

  if (opts.kinesis) {
    const kinesalite = load('kinesalite')
    const server = kinesalite({createStreamMs: 0, deleteStreamMs: 0, updateStreamMs: 0, shardLimit: opts.shardLimit})
    servers.push(server)
    out.kinesis = await listen(server, opts.kinesisPort)
  }
  if (opts.dynamodb) {
    const dynalite = load('dynalite')
    const server = dynalite({createTableMs: 0, deleteTableMs: 0, updateTableMs: 0})
    servers.push(server)
    out.dynamodb = await listen(server, opts.dynamodbPort)
  }
  for (const s of servers) {
    // Large GetRecords responses take a while to build; never cut a request short.
    s.timeout = 0
    if ('requestTimeout' in s) s.requestTimeout = 0
    s.keepAliveTimeout = 60000
    s.on('error', (e) => {
      process.stderr.write('serve.js: server error: ' + e.message + '\n')
      shutdown(1)
    })
  }
  process.stdout.write(JSON.stringify(out) + '\n')
}

main().catch((e) => {
  process.stderr.write('serve.js: ' + (e && e.stack ? e.stack : e) + '\n')
  process.exit(1)
})
