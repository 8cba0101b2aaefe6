// bench/summary_reporter.h: Google Benchmark's console output, and each benchmark's rates
// kept for the program's summary lines (ratios against a baseline run in the same process).
//
// A ratio between two benchmarks measured one after the other moves with the machine: on a
// shared virtual machine the same code ran a third slower for seconds at a time. So the
// decoding benchmarks run each benchmark several times, interleaved at random with the
// others (with_default_repetitions), and a benchmark's rate is the median of its
// repetitions: the baseline and the code measured against it see the same slow spells.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
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
      auto& s = samples_[run.run_name.function_name];
      auto b = run.counters.find("bytes_per_second");
      auto i = run.counters.find("items_per_second");
      if (b != run.counters.end()) s.bytes.push_back(b->second.value);
      if (i != run.counters.end()) s.items.push_back(i->second.value);
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // Per benchmark: {bytes per second, items per second}, each the median of its repetitions.
  std::map<std::string, std::pair<double, double>> rates() const {
    std::map<std::string, std::pair<double, double>> out;
    for (const auto& [name, s] : samples_) out[name] = {median(s.bytes), median(s.items)};
    return out;
  }

 private:
  struct Samples {
    std::vector<double> bytes, items;
  };
  static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  }
  std::map<std::string, Samples> samples_;
};

// The command line with `--benchmark_repetitions=<n>` and random interleaving added, unless it
// names a number of repetitions itself. The returned strings live as long as `storage`.
inline std::vector<char*> with_default_repetitions(int argc, char** argv, int n,
                                                   std::vector<std::string>& storage) {
  std::vector<char*> out(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--benchmark_repetitions", 23) == 0) return out;
  }
  storage = {"--benchmark_repetitions=" + std::to_string(n),
             "--benchmark_enable_random_interleaving=true"};
  for (std::string& s : storage) out.push_back(s.data());
  return out;
}

// What a benchmark program's main does: parses the command line (with the default
// repetitions above), calls `announce()` (to print what is measured), runs the benchmarks
// through a SummaryReporter and returns each one's rates (SummaryReporter::rates()); nullopt
// when the command line names an unknown argument.
template <class Announce>
std::optional<std::map<std::string, std::pair<double, double>>> run_benchmarks(int argc,
                                                                               char** argv,
                                                                               int repetitions,
                                                                               Announce announce) {
  std::vector<std::string> defaults;
  std::vector<char*> args = with_default_repetitions(argc, argv, repetitions, defaults);
  int args_count = static_cast<int>(args.size());
  benchmark::Initialize(&args_count, args.data());
  if (benchmark::ReportUnrecognizedArguments(args_count, args.data())) return std::nullopt;
  announce();
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return reporter.rates();
}

}  // namespace kcl::bench
