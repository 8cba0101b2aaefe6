#include "lifecycle/processor_calls.h"

#include <exception>

namespace kcl::lifecycle {

bool ProcessorCalls::call(const char* what, const std::function<void()>& f) {
  name_.store(what);
  started_ns_.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now().time_since_epoch())
          .count());
  hung_reported_.store(false);
  bool ok = true;
  try {
    f();
  } catch (const std::exception& e) {
    ok = false;
    last_error_ = std::string(what) + " threw: " + e.what();
  } catch (...) {
    ok = false;
    last_error_ = std::string(what) + " threw a non-standard exception";
  }
  started_ns_.store(0);
  return ok;
}

std::optional<StallSignal> ProcessorCalls::signal(SteadyTime now,
                                                  const std::string& lease_key) const {
  const std::int64_t started_ns = started_ns_.load();
  if (started_ns == 0) return std::nullopt;
  const SteadyTime started{
      std::chrono::duration_cast<SteadyTime::duration>(std::chrono::nanoseconds(started_ns))};
  return StallSignal{kStallProcessorCallback,
                     std::string("the processor's ") + name_.load() + " of shard " + lease_key +
                         " has been running for " + seconds_text(now - started),
                     started};
}

}  // namespace kcl::lifecycle
