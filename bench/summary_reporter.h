// bench/summary_reporter.h: Google Benchmark's console output, and each benchmark's rates
// kept for the program's summary lines (ratios against a baseline run in the same process).
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kcl::bench {

// Console output as usual, and remember each benchmark's rates for the summary line.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      auto& r = rates_[run.run_name.function_name];
      auto b = run.counters.find("bytes_per_second");
      auto i = run.counters.find("items_per_second");
      if (b != run.counters.end()) r.first = b->second.value;
      if (i != run.counters.end()) r.second = i->second.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  const std::map<std::string, std::pair<double, double>>& rates() const { return rates_; }

 private:
  std::map<std::string, std::pair<double, double>> rates_;
};

}  // namespace kcl::bench
