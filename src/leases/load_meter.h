// LoadMeter: how much record data each lease this worker reads carries, for balancing by
// load (leader-based assignment publishes it in the heartbeat). Shard consumers report the
// bytes of each batch they process; rates() turns the counts into KB/s smoothed over about
// half a minute.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/clock.h"

namespace kcl::leases {

class LoadMeter {
 public:
  explicit LoadMeter(const Clock& clock) : clock_(clock) {}

  // Bytes of record data processed for a lease (its shard consumer reports each batch).
  void note_processed(std::string_view lease_key, std::size_t bytes);
  // Each of `lease_keys`' recent throughput in KB/s as of now; leases not among them are
  // forgotten. A lease measured for less than a second is left out (no estimate yet).
  std::map<std::string, double> rates(const std::vector<std::string>& lease_keys);

 private:
  struct Meter {
    std::uint64_t bytes = 0;
    std::uint64_t bytes_at_sample = 0;
    std::optional<Clock::MonoTime> sampled_at;
    double kbps = 0;
    bool ready = false;  // one full sample taken
  };
  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Meter, std::less<>> meters_;  // guarded by mu_
};

}  // namespace kcl::leases
