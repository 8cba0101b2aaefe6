// A record processor written with npm aws-kcl's API (the Java KCL's Node package, as its
// users write them), run by `kcl multilang` as the child of each shard: appends
// "<shard> <sequence> <data>" to $MULTILANG_OUT for every record ("<stream>/<shard>" when the
// daemon reads several streams and names the shard's in initialize), checkpoints after each
// batch, at the shard's end and on shutdown; logs its events to stderr.
'use strict';
const fs = require('fs');
const path = require('path');
const kcl = require(path.join(process.env.KCL_NODE_MODULES, 'aws-kcl'));

const out = process.env.MULTILANG_OUT;
let shard = '';

const processor = {
  initialize(input, done) {
    shard = input.streamName ? `${input.streamName}/${input.shardId}` : input.shardId;
    process.stderr.write(`initialize ${shard} at ${input.sequenceNumber}\n`);
    done();
  },
  processRecords(input, done) {
    if (!input.records || input.records.length === 0) return done();
    const lines = input.records
      .map((r) => `${shard} ${r.sequenceNumber} ${Buffer.from(r.data, 'base64').toString()}\n`)
      .join('');
    fs.appendFileSync(out, lines);
    const last = input.records[input.records.length - 1];
    input.checkpointer.checkpoint(last.sequenceNumber, (err) => {
      if (err) process.stderr.write(`checkpoint failed: ${err}\n`);
      done();
    });
  },
  leaseLost(input, done) {
    process.stderr.write(`lease lost ${shard}\n`);
    done();
  },
  shardEnded(input, done) {
    input.checkpointer.checkpoint((err) => {
      if (err) process.stderr.write(`shard end checkpoint failed: ${err}\n`);
      done();
    });
  },
  shutdownRequested(input, done) {
    process.stderr.write(`shutdown requested ${shard}\n`);
    input.checkpointer.checkpoint((err) => {
      if (err) process.stderr.write(`shutdown checkpoint failed: ${err}\n`);
      done();
    });
  },
};

kcl(processor).run();
