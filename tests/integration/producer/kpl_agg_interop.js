// Drives npm aws-kinesis-agg (pinned in package-lock.json) for producer_test.cpp.
//   node kpl_agg_interop.js deagg  < lines of base64 Kinesis record data
//     -> one JSON line per user record: {"record": i, "pk": ..., "ehk": ..., "data": base64}
//   node kpl_agg_interop.js agg    < lines of JSON {"pk": ..., "ehk"?: ..., "data": base64}
//     -> one line: base64 of the aggregated record aws-kinesis-agg builds from all of them
const agg = require('aws-kinesis-agg');
const lines = require('fs').readFileSync(0, 'utf8').split('\n').filter((l) => l.length > 0);
const mode = process.argv[2];
if (mode === 'deagg') {
  lines.forEach((b64, i) => {
    agg.deaggregateSync({data: b64, sequenceNumber: '1'}, true, (err, records) => {
      if (err) { console.error('record ' + i + ': ' + err); process.exit(2); }
      for (const r of records) {
        console.log(JSON.stringify({record: i, pk: r.partitionKey,
                                    ehk: r.explicitPartitionKey || '', data: r.data}));
      }
    });
  });
} else if (mode === 'agg') {
  const a = new agg.RecordAggregator();
  for (const l of lines) {
    const j = JSON.parse(l);
    const rec = {partitionKey: j.pk, data: Buffer.from(j.data, 'base64')};
    if (j.ehk) rec.explicitHashKey = j.ehk;
    a.addUserRecord(rec);
  }
  const built = a.build();
  console.log(Buffer.from(built.data).toString('base64'));
} else {
  console.error('usage: kpl_agg_interop.js deagg|agg');
  process.exit(2);
}
