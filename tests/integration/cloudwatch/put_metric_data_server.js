// A CloudWatch PutMetricData endpoint for tests, on 127.0.0.1, written independently of
// kcl-cpp's client: it checks each request's shape (query protocol, the API's limits) and
// its SigV4 signature (recomputed here with Node's crypto), answers as CloudWatch does, and
// logs one JSON line per request to --log.
//
//   node put_metric_data_server.js --log FILE [--secret S] [--fail-first N] [--delay-ms D]
//
// Prints {"port": P} on stdout once listening. --fail-first N answers the first N requests
// with HTTP 500 InternalFailure; --delay-ms D holds every answer D ms.
'use strict';
const http = require('http');
const crypto = require('crypto');
const fs = require('fs');

const args = process.argv.slice(2);
function arg(name, def) {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
}
const logPath = arg('--log');
const secret = arg('--secret', 'test-secret');
let failFirst = Number(arg('--fail-first', '0'));
const delayMs = Number(arg('--delay-ms', '0'));
const UNITS = new Set(['Seconds', 'Microseconds', 'Milliseconds', 'Bytes', 'Kilobytes', 'Megabytes',
  'Gigabytes', 'Terabytes', 'Bits', 'Kilobits', 'Megabits', 'Gigabits', 'Terabits', 'Percent',
  'Count', 'Bytes/Second', 'Kilobytes/Second', 'Megabytes/Second', 'Gigabytes/Second',
  'Terabytes/Second', 'Bits/Second', 'Kilobits/Second', 'Megabits/Second', 'Gigabits/Second',
  'Terabits/Second', 'Count/Second', 'None']);

const sha256 = (data) => crypto.createHash('sha256').update(data).digest('hex');
const hmac = (key, data) => crypto.createHmac('sha256', key).update(data).digest();

function checkSignature(req, body, problems) {
  const auth = req.headers['authorization'] || '';
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) { problems.push('malformed Authorization header'); return; }
  const [, , date, region, service, signedHeaders, signature] = m;
  if (service !== 'monitoring') problems.push('signed for service ' + service);
  const amzDate = req.headers['x-amz-date'] || '';
  if (!amzDate.startsWith(date)) problems.push('x-amz-date does not match the scope date');
  const names = signedHeaders.split(';');
  for (const must of ['host', 'x-amz-date']) {
    if (!names.includes(must)) problems.push(must + ' is not signed');
  }
  const canonicalHeaders = names.map((n) => n + ':' + String(req.headers[n] || '').trim().replace(/\s+/g, ' ') + '\n').join('');
  const canonical = ['POST', '/', '', canonicalHeaders, signedHeaders, sha256(body)].join('\n');
  const scope = [date, region, service, 'aws4_request'].join('/');
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
  let key = hmac('AWS4' + secret, date);
  key = hmac(key, region);
  key = hmac(key, service);
  key = hmac(key, 'aws4_request');
  const expected = crypto.createHmac('sha256', key).update(toSign).digest('hex');
  if (expected !== signature) problems.push('signature does not match');
}

function checkShape(req, body, problems, out) {
  if (req.method !== 'POST' || req.url !== '/') problems.push('not POST /');
  if (!String(req.headers['content-type'] || '').startsWith('application/x-www-form-urlencoded')) {
    problems.push('content type ' + req.headers['content-type']);
  }
  if (req.headers['x-amz-target']) problems.push('X-Amz-Target sent on a query protocol call');
  if (body.length > 1000 * 1000) problems.push('body of ' + body.length + ' bytes > 1 MB');
  const p = new URLSearchParams(body);
  if (p.get('Action') !== 'PutMetricData') problems.push('Action ' + p.get('Action'));
  if (p.get('Version') !== '2010-08-01') problems.push('Version ' + p.get('Version'));
  const ns = p.get('Namespace');
  if (!ns || ns.length > 255) problems.push('bad Namespace');
  out.namespace = ns;
  out.metrics = [];
  let n = 1;
  for (; p.has('MetricData.member.' + n + '.MetricName'); ++n) {
    const pre = 'MetricData.member.' + n + '.';
    const datum = { name: p.get(pre + 'MetricName'), unit: p.get(pre + 'Unit'), dims: {} };
    if (!UNITS.has(datum.unit)) problems.push('unit ' + datum.unit);
    if (isNaN(Date.parse(p.get(pre + 'Timestamp') || ''))) problems.push('bad Timestamp');
    const stat = {};
    for (const s of ['SampleCount', 'Sum', 'Minimum', 'Maximum']) {
      stat[s] = Number(p.get(pre + 'StatisticValues.' + s));
      if (!Number.isFinite(stat[s])) problems.push(datum.name + ': StatisticValues.' + s + ' missing');
    }
    if (!(stat.SampleCount > 0) || stat.Minimum > stat.Maximum) problems.push(datum.name + ': inconsistent statistics');
    datum.sum = stat.Sum;
    datum.count = stat.SampleCount;
    let d = 1;
    for (; p.has(pre + 'Dimensions.member.' + d + '.Name'); ++d) {
      datum.dims[p.get(pre + 'Dimensions.member.' + d + '.Name')] = p.get(pre + 'Dimensions.member.' + d + '.Value');
    }
    if (d - 1 > 30) problems.push(datum.name + ': more than 30 dimensions');
    out.metrics.push(datum);
  }
  if (n - 1 === 0) problems.push('no MetricData');
  if (n - 1 > 1000) problems.push((n - 1) + ' datums > 1000');
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const problems = [];
    const entry = {};
    checkShape(req, body, problems, entry);
    checkSignature(req, body, problems);
    let status = 200;
    let reply = '<PutMetricDataResponse xmlns="http://monitoring.amazonaws.com/doc/2010-08-01/"><ResponseMetadata><RequestId>req-' + Date.now() + '</RequestId></ResponseMetadata></PutMetricDataResponse>';
    if (failFirst > 0) {
      --failFirst;
      status = 500;
      reply = '<ErrorResponse xmlns="http://monitoring.amazonaws.com/doc/2010-08-01/"><Error><Type>Receiver</Type><Code>InternalFailure</Code><Message>scripted failure</Message></Error><RequestId>req-fail</RequestId></ErrorResponse>';
    } else if (problems.length > 0) {
      status = 400;
      reply = '<ErrorResponse><Error><Type>Sender</Type><Code>InvalidParameterValue</Code><Message>' + problems.join('; ') + '</Message></Error></ErrorResponse>';
    }
    entry.status = status;
    entry.problems = problems;
    fs.appendFileSync(logPath, JSON.stringify(entry) + '\n');
    setTimeout(() => {
      res.writeHead(status, { 'Content-Type': 'text/xml' });
      res.end(reply);
    }, delayMs);
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
