// observability/process_figures.h: this process's CPU time, resident memory and thread count
// from /proc/self/stat, and CPU use as a share of one core between two samples.
//
// Thread safety: ProcessSampler is used by one thread (the status server's refresher).
#pragma once

#include <chrono>
#include <optional>

#include "observability/fleet_figures.h"

namespace kcl::observability {

// The figures of /proc/self/stat's text `stat` (fields utime, stime, num_threads, rss);
// nothing when it cannot be read. `ticks_per_second` and `page_size` as sysconf gives them.
std::optional<ProcessFigures> parse_proc_stat(std::string_view stat, long ticks_per_second,
                                              long page_size);

class ProcessSampler {
 public:
  ProcessSampler();
  // Reads /proc/self/stat now; cpu_percent from the CPU time used since the previous sample.
  ProcessFigures sample();

 private:
  std::chrono::steady_clock::time_point started_;
  std::optional<std::chrono::steady_clock::time_point> last_at_;
  double last_cpu_seconds_ = 0;
};

}  // namespace kcl::observability
