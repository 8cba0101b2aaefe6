#include "observability/process_figures.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kcl::observability {

std::optional<ProcessFigures> parse_proc_stat(std::string_view stat, long ticks_per_second,
                                              long page_size) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields are counted
  // from the last ')'. After it, field 3 (state) comes first.
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0) return std::nullopt;
  std::istringstream in{std::string(stat.substr(close + 1))};
  std::vector<std::string> f;
  for (std::string w; in >> w;) f.push_back(w);
  // Field n (1-based, as proc(5) numbers them) is f[n - 3].
  constexpr std::size_t kUtime = 14, kStime = 15, kThreads = 20, kRss = 24;
  if (f.size() < kRss - 2) return std::nullopt;
  try {
    ProcessFigures p;
    const double ticks = std::stod(f[kUtime - 3]) + std::stod(f[kStime - 3]);
    p.cpu_seconds = ticks / static_cast<double>(ticks_per_second);
    p.threads = std::stoi(f[kThreads - 3]);
    p.rss_bytes = std::stoll(f[kRss - 3]) * page_size;
    return p;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

ProcessSampler::ProcessSampler() : started_(std::chrono::steady_clock::now()) {}

ProcessFigures ProcessSampler::sample() {
  std::ifstream file("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto now = std::chrono::steady_clock::now();
  ProcessFigures p = parse_proc_stat(text, ::sysconf(_SC_CLK_TCK), ::sysconf(_SC_PAGESIZE))
                         .value_or(ProcessFigures{});
  p.uptime_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - started_).count();
  if (last_at_) {
    const double secs = std::chrono::duration<double>(now - *last_at_).count();
    if (secs > 0) p.cpu_percent = 100.0 * (p.cpu_seconds - last_cpu_seconds_) / secs;
  }
  last_at_ = now;
  last_cpu_seconds_ = p.cpu_seconds;
  return p;
}

}  // namespace kcl::observability
