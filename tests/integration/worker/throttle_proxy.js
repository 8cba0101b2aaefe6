// The scenario suite's fault proxy (tools/scenario/fault_proxy.js) in front of the emulators,
// answering every GetRecords with ProvisionedThroughputExceededException while a control file
// exists (kinesalite never throttles); everything else passes through.
//
//   node throttle_proxy.js FAULT_PROXY_JS KINESIS_URL DYNAMODB_URL CONTROL_FILE
//
// Prints {"port": P} (the Kinesis side) once listening; runs until killed.
'use strict'
const fs = require('fs')
const [proxyPath, kinesis, dynamodb, control] = process.argv.slice(2)
const {startFaultProxy} = require(proxyPath)

async function main() {
  const p = await startFaultProxy(
    {kinesis, dynamodb},
    {rates: {'kinesis.GetRecords': {throughput: 1}}, enabled: false}
  )
  const follow = () => (fs.existsSync(control) ? p.enable() : p.disable())
  follow()
  setInterval(follow, 50)
  const port = Number(new URL(p.urls.kinesis).port)
  process.stdout.write(JSON.stringify({port}) + '\n')
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n')
  process.exit(1)
})
