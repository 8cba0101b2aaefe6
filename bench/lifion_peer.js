#!/usr/bin/env node
// The consumer peer of bench/consume_e2e.py (run "lifion"): lifion-kinesis (pinned in
// package.json) reading a stream by polling GetRecords from TRIM_HORIZON, leases and
// checkpoints in DynamoDB (its own table, automatic checkpoints), records handed over as
// Buffers (no JSON parsing, no deaggregation). Exits 0 once it has seen COUNT records; 1 on an
// error it reports. Endpoints, region and credentials come from the environment as
// consume_e2e.py sets them (AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION,
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
//
//   node bench/lifion_peer.js STREAM APP COUNT
'use strict'

const path = require('path')

const [stream, app, countText] = process.argv.slice(2)
const want = Number(countText)
if (!stream || !app || !Number.isInteger(want) || want < 1) {
  process.stderr.write('usage: node bench/lifion_peer.js STREAM APP COUNT\n')
  process.exit(2)
}
// lifion-kinesis from KCL_NODE_MODULES, the repository's node_modules, or NODE_PATH.
let Kinesis
for (const from of [process.env.KCL_NODE_MODULES, path.join(__dirname, '..', 'node_modules'), '']) {
  if (from === undefined) continue
  try {
    Kinesis = require(from ? path.join(from, 'lifion-kinesis') : 'lifion-kinesis')
    break
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e
  }
}
if (!Kinesis) {
  process.stderr.write('lifion_peer: lifion-kinesis not found (KCL_NODE_MODULES, node_modules, ' +
                       'NODE_PATH); run scripts/install-deps.sh\n')
  process.exit(1)
}

const quiet = {debug() {}, info() {}, warn() {}, error(...a) { process.stderr.write(a.join(' ') + '\n') }}
const kinesis = new Kinesis({
  streamName: stream,
  consumerGroup: app,
  endpoint: process.env.AWS_ENDPOINT_URL_KINESIS,
  region: process.env.AWS_REGION || 'us-east-1',
  dynamoDb: {endpoint: process.env.AWS_ENDPOINT_URL_DYNAMODB, tableName: 'lifion-' + app},
  createStreamIfNeeded: false,
  initialPositionInStream: 'TRIM_HORIZON',
  useAutoCheckpoints: true,
  shouldParseJson: false,
  shouldDeaggregate: false,
  leaseAcquisitionInterval: 500,
  noRecordsPollDelay: 250,
  pollDelay: 0,
  statsInterval: 3600000,
  logger: quiet,
})
let seen = 0
kinesis.on('data', (chunk) => {
  seen += chunk.records.length
  if (seen >= want) {
    process.stdout.write(JSON.stringify({records: seen}) + '\n')
    process.exit(0)
  }
})
kinesis.on('error', (e) => {
  process.stderr.write(`lifion_peer: ${e && e.stack || e}\n`)
  process.exit(1)
})
kinesis.startConsumer().catch((e) => {
  process.stderr.write(`lifion_peer: startConsumer: ${e && e.stack || e}\n`)
  process.exit(1)
})
