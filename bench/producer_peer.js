#!/usr/bin/env node
// The producer benchmark's peer: a plain Node loop over the AWS SDK for JavaScript v3
// (@aws-sdk/client-kinesis and its HTTP/1.1 handler, pinned in package-lock.json) doing what `kcl put --file F` does:
// each line of F becomes one record (partition key: its line number), sent by PutRecords in
// calls of 500 with 4 calls in flight; records a call's answer marks failed are sent again
// (up to 8 attempts), so every record is written or counted as failed. Reads F as a stream.
//
//   AWS_ENDPOINT_URL_KINESIS=http://127.0.0.1:P node bench/producer_peer.js STREAM FILE
//
// Prints one JSON line: {"records":N,"failed":F,"calls":C,"retried":R}. Exit status 1 when
// some record failed.
'use strict'

const fs = require('fs')
const http = require('http')
const path = require('path')
const readline = require('readline')

const modules = path.join(__dirname, '..', 'node_modules')
const {KinesisClient, PutRecordsCommand} = require(path.join(modules, '@aws-sdk', 'client-kinesis'))
const {NodeHttpHandler} = require(path.join(modules, '@smithy', 'node-http-handler'))

const kBatch = 500
const kInFlight = 4
const kMaxAttempts = 8

async function main() {
  const [stream, file] = process.argv.slice(2)
  if (!stream || !file) {
    process.stderr.write('usage: producer_peer.js STREAM FILE\n')
    process.exit(2)
  }
  const client = new KinesisClient({
    endpoint: process.env.AWS_ENDPOINT_URL_KINESIS,
    region: process.env.AWS_REGION || 'us-east-1',
    maxAttempts: 1,
    // The Kinesis client speaks HTTP/2 by default (TLS with ALPN on AWS); kinesalite serves
    // HTTP/1.1 only: kept-alive connections, one per call in flight.
    requestHandler: new NodeHttpHandler({
      httpAgent: new http.Agent({keepAlive: true, maxSockets: kInFlight}),
    }),
  })
  const counts = {records: 0, failed: 0, calls: 0, retried: 0}
  const inFlight = new Set()

  // Sends `records` (each {Data, PartitionKey}), then again those that failed.
  async function send(records) {
    for (let attempt = 1; records.length > 0; attempt++) {
      counts.calls++
      let out
      try {
        out = await client.send(new PutRecordsCommand({StreamName: stream, Records: records}))
      } catch (e) {
        out = {Records: records.map(() => ({ErrorCode: e.name || 'Error'}))}
      }
      const again = records.filter((r, i) => out.Records[i].ErrorCode)
      counts.records += records.length - again.length
      if (attempt >= kMaxAttempts) {
        counts.failed += again.length
        return
      }
      counts.retried += again.length
      records = again
    }
  }

  async function dispatch(records) {
    while (inFlight.size >= kInFlight) await Promise.race(inFlight)
    const p = send(records).finally(() => inFlight.delete(p))
    inFlight.add(p)
  }

  const lines = readline.createInterface({input: fs.createReadStream(file), crlfDelay: Infinity})
  let batch = []
  let lineNo = 0
  for await (const line of lines) {
    lineNo++
    batch.push({Data: Buffer.from(line), PartitionKey: String(lineNo)})
    if (batch.length === kBatch) {
      await dispatch(batch)
      batch = []
    }
  }
  if (batch.length > 0) await dispatch(batch)
  await Promise.all(inFlight)
  process.stdout.write(JSON.stringify(counts) + '\n')
  process.exit(counts.failed === 0 ? 0 : 1)
}

main().catch((e) => {
  process.stderr.write('producer_peer.js: ' + (e && e.stack ? e.stack : e) + '\n')
  process.exit(1)
})
