// CBOR (RFC 8949) as the AWS "cbor-1.1" protocol (Content-Type application/x-amz-cbor-1.1)
// uses it, for the scripted servers (bench/fanout_server.js): an encoder that appends items to
// a growing buffer and a decoder of whole request bodies into plain JavaScript values.
//
// Encoding: null / undefined -> null (0xf6); booleans; integral numbers -> major type 0 or 1;
// other numbers -> double; strings -> text; Buffers / Uint8Arrays -> byte strings (major type
// 2); arrays; plain objects -> maps of text keys (members whose value is undefined are left
// out); `new Tagged(tag, value)` -> the tag and its item. Timestamps go as AWS's cbor-1.1
// protocol sends them: tag 1 and integer epoch milliseconds (`epochMillis(ms)`).
// Decoding: maps -> objects (text keys only), byte strings -> Buffers (views into the input),
// text -> strings, tags -> their item (tag 1's number stays milliseconds as sent),
// definite and indefinite lengths, half / single / double floats. Anything malformed
// (truncated, a reserved head, a non-text key, trailing bytes, deeper than 64) throws an
// Error saying what and at which byte.
'use strict';

class Tagged {
  constructor(tag, value) {
    this.tag = tag;
    this.value = value;
  }
}

const epochMillis = (ms) => new Tagged(1, Math.round(ms));

class Encoder {
  constructor(size = 4096) {
    this.buf = Buffer.allocUnsafe(size);
    this.at = 0;
  }

  room(n) {
    if (this.at + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
  }

  // A head of `major` (0-7) with argument `n` (a non-negative integer), shortest form.
  head(major, n) {
    this.room(9);
    const m = major << 5;
    const b = this.buf;
    if (n < 24) {
      b[this.at++] = m | n;
    } else if (n < 0x100) {
      b[this.at++] = m | 24;
      b[this.at++] = n;
    } else if (n < 0x10000) {
      b[this.at++] = m | 25;
      b.writeUInt16BE(n, this.at);
      this.at += 2;
    } else if (n < 0x100000000) {
      b[this.at++] = m | 26;
      b.writeUInt32BE(n, this.at);
      this.at += 4;
    } else {
      b[this.at++] = m | 27;
      b.writeBigUInt64BE(BigInt(n), this.at);
      this.at += 8;
    }
  }

  text(s) {
    const n = Buffer.byteLength(s);
    this.head(3, n);
    this.room(n);
    this.at += this.buf.write(s, this.at, 'utf8');
  }

  bytes(data) {
    this.head(2, data.length);
    this.room(data.length);
    this.buf.set(data, this.at);
    this.at += data.length;
  }

  number(v) {
    if (Number.isInteger(v) && Math.abs(v) <= Number.MAX_SAFE_INTEGER) {
      if (v >= 0) this.head(0, v);
      else this.head(1, -1 - v);
      return;
    }
    this.room(9);
    this.buf[this.at++] = 0xfb;
    this.buf.writeDoubleBE(v, this.at);
    this.at += 8;
  }

  value(v) {
    if (v === null || v === undefined) {
      this.room(1);
      this.buf[this.at++] = 0xf6;
    } else if (typeof v === 'boolean') {
      this.room(1);
      this.buf[this.at++] = v ? 0xf5 : 0xf4;
    } else if (typeof v === 'number') {
      this.number(v);
    } else if (typeof v === 'string') {
      this.text(v);
    } else if (v instanceof Uint8Array) {
      this.bytes(v);
    } else if (Array.isArray(v)) {
      this.head(4, v.length);
      for (const e of v) this.value(e);
    } else if (v instanceof Tagged) {
      this.head(6, v.tag);
      this.value(v.value);
    } else if (typeof v === 'object') {
      const keys = Object.keys(v).filter((k) => v[k] !== undefined);
      this.head(5, keys.length);
      for (const k of keys) {
        this.text(k);
        this.value(v[k]);
      }
    } else {
      throw new Error('cbor.js: cannot encode a ' + typeof v);
    }
  }

  // The bytes written so far (a view of the encoder's buffer).
  result() {
    return this.buf.subarray(0, this.at);
  }
}

function encode(v) {
  const e = new Encoder(256);
  e.value(v);
  return Buffer.from(e.result());
}

const MAX_DEPTH = 64;

function decode(buf) {
  let at = 0;
  const fail = (what) => {
    throw new Error('malformed CBOR: ' + what + ' (byte ' + at + ')');
  };
  const need = (n) => {
    if (n > buf.length - at) fail('truncated');
  };
  // [major, argument or -1 for indefinite, info]
  const head = () => {
    need(1);
    const first = buf[at++];
    const major = first >> 5;
    const info = first & 31;
    if (info < 24) return [major, info, info];
    if (info === 24) { need(1); return [major, buf[at++], info]; }
    if (info === 25) { need(2); at += 2; return [major, buf.readUInt16BE(at - 2), info]; }
    if (info === 26) { need(4); at += 4; return [major, buf.readUInt32BE(at - 4), info]; }
    if (info === 27) {
      need(8);
      at += 8;
      const big = buf.readBigUInt64BE(at - 8);
      if (major !== 7 && big > BigInt(Number.MAX_SAFE_INTEGER)) fail('an argument beyond 2^53');
      return [major, major === 7 ? 0 : Number(big), info];
    }
    if (info === 31 && major >= 2 && major <= 5) return [major, -1, info];
    if (info === 31 && major === 7) fail('a break outside an indefinite-length item');
    return fail('reserved additional information ' + info);
  };
  const isBreak = () => {
    need(1);
    if (buf[at] !== 0xff) return false;
    ++at;
    return true;
  };
  const item = (depth) => {
    if (depth > MAX_DEPTH) fail('nested deeper than ' + MAX_DEPTH);
    const start = at;
    const [major, n, info] = head();
    switch (major) {
      case 0: return n;
      case 1: return -1 - n;
      case 2:
      case 3: {
        let bytes;
        if (n < 0) {
          const chunks = [];
          while (!isBreak()) {
            const [m, len] = head();
            if (m !== major || len < 0) fail('a chunk of another type inside an indefinite string');
            need(len);
            chunks.push(buf.subarray(at, at + len));
            at += len;
          }
          bytes = Buffer.concat(chunks);
        } else {
          need(n);
          bytes = buf.subarray(at, at + n);
          at += n;
        }
        return major === 2 ? bytes : bytes.toString('utf8');
      }
      case 4: {
        const out = [];
        if (n < 0) while (!isBreak()) out.push(item(depth + 1));
        else for (let i = 0; i < n; ++i) out.push(item(depth + 1));
        return out;
      }
      case 5: {
        const out = {};
        for (let i = 0; n < 0 ? !isBreak() : i < n; ++i) {
          const key = item(depth + 1);
          if (typeof key !== 'string') fail('a map key that is not text');
          out[key] = item(depth + 1);
        }
        return out;
      }
      case 6: return item(depth + 1);
      default: {
        if (info < 24 || info === 24) {
          if (n === 20) return false;
          if (n === 21) return true;
          if (n === 22 || n === 23) return null;
          return fail('an unknown simple value ' + n);
        }
        const bits = buf.subarray(start + 1, at);
        if (info === 25) return halfFloat(bits.readUInt16BE(0));
        if (info === 26) return bits.readFloatBE(0);
        return bits.readDoubleBE(0);
      }
    }
  };
  const v = item(0);
  if (at !== buf.length) fail('trailing bytes after the item');
  return v;
}

function halfFloat(h) {
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  const sign = h & 0x8000 ? -1 : 1;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 31) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

module.exports = {Encoder, Tagged, encode, decode, epochMillis};
