#include "leases/load_meter.h"

#include <algorithm>
#include <chrono>
#include <set>

namespace kcl::leases {

void LoadMeter::note_processed(std::string_view lease_key, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = meters_.find(lease_key);
  if (it == meters_.end()) it = meters_.emplace(std::string(lease_key), Meter{}).first;
  it->second.bytes += bytes;
}

std::map<std::string, double> LoadMeter::rates(const std::vector<std::string>& lease_keys) {
  using std::chrono::duration;
  constexpr double kTimeConstantS = 30;
  const auto now = clock_.now();
  std::map<std::string, double> out;
  const std::set<std::string_view> keep(lease_keys.begin(), lease_keys.end());
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(meters_, [&](const auto& kv) { return !keep.count(kv.first); });
  for (const std::string& key : lease_keys) {
    Meter& m = meters_[key];
    if (!m.sampled_at) {
      m.sampled_at = now;
      m.bytes_at_sample = m.bytes;
    }
    const double dt = duration<double>(now - *m.sampled_at).count();
    if (dt >= 1.0) {
      const double rate = static_cast<double>(m.bytes - m.bytes_at_sample) / 1024.0 / dt;
      // The first full sample sets the estimate; later ones move it by how much time passed.
      m.kbps = !m.ready ? rate : m.kbps + (rate - m.kbps) * dt / (dt + kTimeConstantS);
      m.ready = true;
      m.sampled_at = now;
      m.bytes_at_sample = m.bytes;
    }
    // A lease measured for less than a second has no estimate yet: the leader then assumes
    // the mean of the others rather than an idle shard.
    if (m.ready) out.emplace(key, m.kbps);
  }
  return out;
}

}  // namespace kcl::leases
