// producer/shard_rate.h: the write-rate limit of one shard, as AWS counts it, and the pace
// the producer keeps under it.
//
// Two parts, each for records and for bytes:
//  - The window: what the shard may have counted against it in the last second. Kinesis
//    counts a shard's writes per second (the limits proxy, like AWS, over a sliding second,
//    counting a record when it arrives). The producer cannot see when a record arrived, only
//    that it was between the call's send and its answer. A record counts from when it is
//    taken for a call until one second after its arrival could have been: the call's answer,
//    or, when the answer is slower, `jitter` after the record was taken. (What matters is not
//    how long a call takes to arrive but by how much that varies from call to call: a call
//    that arrives `jitter` later than the one before it still lands in the service's next
//    second; an answer that comes within `jitter` bounds the arrival for certain.) A record
//    the answer says failed stops counting at the answer (the service did not write it); a
//    call that failed as a whole counts all its records (they may have been written); records
//    in flight count until their answer; the records of the shard's first call count until a
//    second after its answer (a first call can take much longer to arrive than the next:
//    a new connection, the service's first look at the stream). take() refuses what would put more
//    than the configured limit in the window, so the sustained rate is about limit / (1 s +
//    min(round trip, jitter)), and no second of arrivals holds more than the limit unless arrivals
//    jitter by more than `jitter`.
//  - The pace: a token bucket at the current rate, holding at most one second of it and
//    starting with `start_seconds` of it (so a shard does not open with a second's burst),
//    which spreads a shard's sends over the second instead of sending the window's worth at
//    once.
// A throttle is answered at most once per call, and not for a call sent before the last
// answer to one (its answer says nothing about what that changed). When the window, with
// the records just refused, was near the limit (9/10 of it), the producer's own arrivals
// varied by more than the jitter: the jitter doubles (up to a second), and its excess over
// the configured one halves every 10 s without a throttle. Otherwise someone else writes to
// the shard too: the rate halves, down to a tenth of the configured rate, and comes back by a
// quarter of the configured rate each second without a throttle (from half to all in 2 s).
//
// take() succeeds when both parts allow (a request larger than the limit is allowed once
// nothing else counts, so one big record is never stuck). The configured limits are the
// shard's (1,000 records/s, 1 MiB/s); 0 = no limit.
//
// Thread safety: a plain value; the producer's lock guards it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>

#include "kcl/clock.h"

namespace kcl::producer {

class ShardRate {
 public:
  // The rate a throttle leaves (of the current one), its floor (of the configured one), and
  // what each second without a throttle gives back (of the configured one).
  static constexpr double kCut = 0.5;
  static constexpr double kFloor = 0.1;
  static constexpr double kRecoveryPerSecond = 0.25;
  // The window's fill (of the limit) from which a throttle is put down to the jitter; the
  // most the jitter grows to; how long its excess takes to halve.
  static constexpr double kNearLimit = 0.9;
  static constexpr std::chrono::seconds kMaxJitter{1};
  static constexpr double kJitterHalfLifeSeconds = 10;

  // How much later than the call before it a call may arrive at the service (see above).
  static constexpr std::chrono::milliseconds kDefaultJitter{20};

  // 0 = no limit. `start_seconds` (0..1): the tokens the bucket starts with, in seconds of
  // the rate.
  ShardRate(double records_per_second, double bytes_per_second, Clock::MonoTime now,
            double start_seconds = 1.0, Clock::MonoTime::duration jitter = kDefaultJitter)
      : base_jitter_(jitter),
        jitter_(jitter),
        max_records_(records_per_second),
        max_bytes_(bytes_per_second),
        records_(records_per_second, start_seconds, now),
        bytes_(bytes_per_second, start_seconds, now),
        last_change_(now),
        last_cut_(Clock::MonoTime::min()) {}

  // Takes the tokens and the window's room for `records` Kinesis records of `bytes` bytes
  // (they count as in flight until on_answered()); false (nothing taken) when the shard must
  // wait.
  bool take(double records, double bytes, Clock::MonoTime now) {
    recover(now);
    if (!records_.can(records, now) || !bytes_.can(bytes, now)) return false;
    if (!window_allows(records, bytes, now)) return false;
    records_.take(records);
    bytes_.take(bytes);
    if (limited()) {
      flight_records_ += records;
      flight_bytes_ += bytes;
    }
    return true;
  }
  // When take() of that much may next succeed (now when it may already). When records in
  // flight stand in the way, a second from now: their answer (which the caller waits for
  // anyway) is what frees them.
  Clock::MonoTime ready_at(double records, double bytes, Clock::MonoTime now) {
    recover(now);
    return std::max({records_.ready_at(records, now), bytes_.ready_at(bytes, now),
                     window_ready_at(records, bytes, now)});
  }
  // A call that took `sent_*` of this shard at `taken_at` was answered: they leave the
  // flight, and `written_*` of them count in the window until a second after the earlier of
  // now and `taken_at` + jitter.
  void on_answered(double sent_records, double sent_bytes, double written_records,
                   double written_bytes, Clock::MonoTime taken_at, Clock::MonoTime now) {
    if (!limited()) return;
    flight_records_ = std::max(0.0, flight_records_ - sent_records);
    flight_bytes_ = std::max(0.0, flight_bytes_ - sent_bytes);
    const bool first = !answered_;
    answered_ = true;
    if (written_records <= 0 && written_bytes <= 0) return;
    const Clock::MonoTime arrived_by = first ? now : std::min(now, taken_at + jitter_);
    const Clock::MonoTime expires = arrived_by + std::chrono::seconds(1);
    if (expires <= now) return;  // counted no longer
    auto at = written_.end();
    while (at != written_.begin() && std::prev(at)->expires > expires) --at;
    written_.insert(at, Written{expires, written_records, written_bytes});
    window_records_ += written_records;
    window_bytes_ += written_bytes;
  }
  // A call sent at `sent_at` came back with `refused_*` of this shard's records throttled
  // (after on_answered()): widens the jitter or cuts the rate (see above), unless one of
  // them changed after that call left. True when it cut the rate.
  bool on_throttled(Clock::MonoTime sent_at, double refused_records, double refused_bytes,
                    Clock::MonoTime now) {
    recover(now);
    if (sent_at < last_cut_) return false;
    last_cut_ = now;
    last_change_ = now;
    prune(now);
    const auto near = [](double have, double max) { return max > 0 && have >= kNearLimit * max; };
    if (near(window_records_ + flight_records_ + refused_records, max_records_) ||
        near(window_bytes_ + flight_bytes_ + refused_bytes, max_bytes_)) {
      const auto doubled =
          2 * std::max<Clock::MonoTime::duration>(jitter_, std::chrono::milliseconds(5));
      jitter_ = std::min<Clock::MonoTime::duration>(doubled, kMaxJitter);
      return false;
    }
    records_.set_rate(std::max(records_.rate * kCut, max_records_ * kFloor), now);
    bytes_.set_rate(std::max(bytes_.rate * kCut, max_bytes_ * kFloor), now);
    return true;
  }
  // How much later than the one before it a call may arrive (see above).
  Clock::MonoTime::duration jitter() const { return jitter_; }
  // The records and the bytes take() would allow now (infinity without a limit).
  double records_available(Clock::MonoTime now) {
    recover(now);
    prune(now);
    if (max_records_ <= 0) return records_.available(now);
    return std::min(records_.available(now),
                    std::max(0.0, max_records_ - window_records_ - flight_records_));
  }
  double bytes_available(Clock::MonoTime now) {
    recover(now);
    prune(now);
    if (max_bytes_ <= 0) return bytes_.available(now);
    return std::min(bytes_.available(now),
                    std::max(0.0, max_bytes_ - window_bytes_ - flight_bytes_));
  }
  double records_rate() const { return records_.rate; }
  double bytes_rate() const { return bytes_.rate; }
  // What the window holds now (in flight and written in the last second after the answer).
  double window_records(Clock::MonoTime now) {
    prune(now);
    return window_records_ + flight_records_;
  }
  double window_bytes(Clock::MonoTime now) {
    prune(now);
    return window_bytes_ + flight_bytes_;
  }

 private:
  struct Bucket {
    Bucket(double r, double start_seconds, Clock::MonoTime now)
        : rate(r), tokens(r * std::clamp(start_seconds, 0.0, 1.0)), at(now) {}
    double rate;
    double tokens;
    Clock::MonoTime at;
    void refill(Clock::MonoTime now) {
      const double secs = std::chrono::duration<double>(now - at).count();
      if (secs > 0) tokens = std::min(rate, tokens + secs * rate);
      at = std::max(at, now);
    }
    bool can(double n, Clock::MonoTime now) {
      if (rate <= 0) return true;
      refill(now);
      return tokens >= std::min(n, rate);
    }
    double available(Clock::MonoTime now) {
      if (rate <= 0) return std::numeric_limits<double>::infinity();
      refill(now);
      return std::max(0.0, tokens);
    }
    void take(double n) {
      if (rate > 0) tokens -= n;  // may go below 0 for an oversized request: repaid later
    }
    Clock::MonoTime ready_at(double n, Clock::MonoTime now) {
      if (can(n, now)) return now;
      const double missing = std::min(n, rate) - tokens;
      return now + std::chrono::duration_cast<Clock::MonoTime::duration>(
                       std::chrono::duration<double>(missing / rate));
    }
    void set_rate(double r, Clock::MonoTime now) {
      refill(now);
      rate = r;
      tokens = std::min(tokens, rate);
    }
  };
  // Records an answer said were written: they count until `expires`.
  struct Written {
    Clock::MonoTime expires;
    double records;
    double bytes;
  };

  bool limited() const { return max_records_ > 0 || max_bytes_ > 0; }

  void prune(Clock::MonoTime now) {
    while (!written_.empty() && written_.front().expires <= now) {
      window_records_ -= written_.front().records;
      window_bytes_ -= written_.front().bytes;
      written_.pop_front();
    }
    if (written_.empty()) window_records_ = window_bytes_ = 0;  // no rounding left behind
  }
  // Whether `have` + `n` stays within `max` (no limit at 0; a request over the limit fits
  // when nothing else counts).
  static bool fits(double have, double n, double max) {
    return max <= 0 || have + n <= max || have <= 0;
  }
  bool window_allows(double records, double bytes, Clock::MonoTime now) {
    prune(now);
    return fits(window_records_ + flight_records_, records, max_records_) &&
           fits(window_bytes_ + flight_bytes_, bytes, max_bytes_);
  }
  Clock::MonoTime window_ready_at(double records, double bytes, Clock::MonoTime now) {
    if (window_allows(records, bytes, now)) return now;
    // The first expiry after which what is left (and in flight) lets the request in.
    double r = window_records_, b = window_bytes_;
    for (const Written& w : written_) {
      r -= w.records;
      b -= w.bytes;
      if (fits(r + flight_records_, records, max_records_) &&
          fits(b + flight_bytes_, bytes, max_bytes_)) {
        return w.expires;
      }
    }
    return now + std::chrono::seconds(1);
  }

  void recover(Clock::MonoTime now) {
    if (!limited() || now <= last_change_) return;
    if (records_.rate >= max_records_ && bytes_.rate >= max_bytes_ && jitter_ <= base_jitter_) {
      last_change_ = now;  // nothing to give back (the common case: one look a record)
      return;
    }
    const double secs = std::chrono::duration<double>(now - last_change_).count();
    if (jitter_ > base_jitter_) {
      const double keep = std::exp2(-secs / kJitterHalfLifeSeconds);
      jitter_ = base_jitter_ + std::chrono::duration_cast<Clock::MonoTime::duration>(
                                   (jitter_ - base_jitter_) * keep);
    }
    records_.set_rate(
        std::min(max_records_, records_.rate + secs * max_records_ * kRecoveryPerSecond), now);
    bytes_.set_rate(std::min(max_bytes_, bytes_.rate + secs * max_bytes_ * kRecoveryPerSecond),
                    now);
    last_change_ = now;
  }

  const Clock::MonoTime::duration base_jitter_;
  Clock::MonoTime::duration jitter_;
  double max_records_;
  double max_bytes_;
  Bucket records_;
  Bucket bytes_;
  Clock::MonoTime last_change_;
  Clock::MonoTime last_cut_;
  bool answered_ = false;  // whether a call of the shard was answered
  std::deque<Written> written_;
  double window_records_ = 0, window_bytes_ = 0;  // of written_
  double flight_records_ = 0, flight_bytes_ = 0;  // taken, not yet answered
};

}  // namespace kcl::producer
