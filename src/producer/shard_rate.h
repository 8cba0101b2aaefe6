// producer/shard_rate.h: the write-rate limit of one shard, as two token buckets (records/s
// and bytes/s) whose rate shrinks when the service throttles and recovers while it does not.
//
// Each bucket holds at most one second of its current rate. take() succeeds when both hold
// enough tokens (a request larger than a bucket's capacity is allowed once the bucket is full,
// so one big record is never stuck). A throttle halves the rate (floor: a tenth of the
// configured rate); every second without one gives back a tenth of the configured rate.
//
// Thread safety: a plain value; the producer's lock guards it.
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>

#include "kcl/clock.h"

namespace kcl::producer {

class ShardRate {
 public:
  // 0 = no limit.
  ShardRate(double records_per_second, double bytes_per_second, Clock::MonoTime now)
      : max_records_(records_per_second),
        max_bytes_(bytes_per_second),
        records_(records_per_second, now),
        bytes_(bytes_per_second, now),
        last_change_(now) {}

  // Takes the tokens for `records` Kinesis records of `bytes` bytes; false (nothing taken)
  // when the shard must wait.
  bool take(double records, double bytes, Clock::MonoTime now) {
    recover(now);
    if (!records_.can(records, now) || !bytes_.can(bytes, now)) return false;
    records_.take(records);
    bytes_.take(bytes);
    return true;
  }
  // When take() of that much may next succeed (now when it may already).
  Clock::MonoTime ready_at(double records, double bytes, Clock::MonoTime now) {
    recover(now);
    return std::max(records_.ready_at(records, now), bytes_.ready_at(bytes, now));
  }
  void on_throttled(Clock::MonoTime now) {
    recover(now);
    records_.set_rate(std::max(records_.rate / 2, max_records_ / 10), now);
    bytes_.set_rate(std::max(bytes_.rate / 2, max_bytes_ / 10), now);
    last_change_ = now;
  }
  // The records and the bytes take() would allow now (infinity without a limit).
  double records_available(Clock::MonoTime now) {
    recover(now);
    return records_.available(now);
  }
  double bytes_available(Clock::MonoTime now) {
    recover(now);
    return bytes_.available(now);
  }
  double records_rate() const { return records_.rate; }
  double bytes_rate() const { return bytes_.rate; }

 private:
  struct Bucket {
    Bucket(double r, Clock::MonoTime now) : rate(r), tokens(r), at(now) {}
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

  void recover(Clock::MonoTime now) {
    if (max_records_ <= 0 && max_bytes_ <= 0) return;
    const auto whole = std::chrono::duration_cast<std::chrono::seconds>(now - last_change_);
    if (whole.count() <= 0) return;
    const double steps = static_cast<double>(whole.count());
    records_.set_rate(std::min(max_records_, records_.rate + steps * max_records_ / 10), now);
    bytes_.set_rate(std::min(max_bytes_, bytes_.rate + steps * max_bytes_ / 10), now);
    last_change_ += whole;
  }

  double max_records_;
  double max_bytes_;
  Bucket records_;
  Bucket bytes_;
  Clock::MonoTime last_change_;
};

}  // namespace kcl::producer
