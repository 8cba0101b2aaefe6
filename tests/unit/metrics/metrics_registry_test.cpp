// The registry's Prometheus exposition, checked by hand and by an independent parser
// (python3-prometheus-client's text_string_to_metric_families).
#include "metrics/metrics_registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace kcl::metrics {
namespace {

using namespace std::chrono_literals;

// Runs python3 with the exposition on stdin; returns what the script printed.
std::string parse_with_prometheus_client(const std::string& text, const std::string& script) {
  auto dir =
      std::filesystem::temp_directory_path() / ("kcl_metrics_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto input = dir / "metrics.txt";
  auto code = dir / "parse.py";
  std::ofstream(input) << text;
  std::ofstream(code) << "import sys\n"
                         "from prometheus_client.parser import text_string_to_metric_families\n"
                         "fams = list(text_string_to_metric_families(open(sys.argv[1]).read()))\n"
                      << script;
  // Debian's python3, where python3-prometheus-client is installed (not a pyenv shim).
  std::string cmd = "/usr/bin/python3 " + code.string() + " " + input.string() + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = ::pclose(p);
  std::filesystem::remove_all(dir);
  if (rc != 0) return "python3 failed: " + out;
  return out;
}

TEST(MetricsRegistry, CountersGaugesAndHistogramsInTheExposition) {
  MetricsRegistry reg;
  MetricTag a{"shard", "shardId-000000000000"};
  MetricTag b{"shard", "shardId-000000000001"};
  reg.count("consumer.records_processed", 10, MetricTags(&a, 1));
  reg.count("consumer.records_processed", 5, MetricTags(&a, 1));
  reg.count("consumer.records_processed", 7, MetricTags(&b, 1));
  reg.gauge("leases.held", 3, {});
  reg.gauge("leases.held", 2, {});
  reg.timing("processor.process_records", 3ms, MetricTags(&a, 1));
  reg.timing("processor.process_records", 2s, MetricTags(&a, 1));
  std::string text = reg.prometheus_text();
  EXPECT_NE(text.find("# TYPE kcl_records_processed_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kcl_records_processed_total{shard=\"shardId-000000000000\"} 15\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE kcl_leases_held gauge\nkcl_leases_held 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("kcl_processor_duration_seconds_bucket{shard=\"shardId-000000000000\","
                      "le=\"0.005\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kcl_processor_duration_seconds_count{shard=\"shardId-000000000000\"} 2\n"),
            std::string::npos)
      << text;
  // One HELP and one TYPE per family.
  std::size_t helps = 0;
  for (std::size_t p = text.find("# HELP kcl_records_processed_total"); p != std::string::npos;
       p = text.find("# HELP kcl_records_processed_total", p + 1)) {
    ++helps;
  }
  EXPECT_EQ(helps, 1u);

  std::string parsed = parse_with_prometheus_client(
      text,
      "for f in fams:\n"
      "  for s in f.samples:\n"
      "    print(f.type, s.name, sorted(s.labels.items()), s.value)\n");
  EXPECT_NE(parsed.find("counter kcl_records_processed_total "
                        "[('shard', 'shardId-000000000000')] 15.0"),
            std::string::npos)
      << parsed;
  EXPECT_NE(parsed.find("gauge kcl_leases_held [] 2.0"), std::string::npos) << parsed;
  EXPECT_NE(parsed.find("histogram kcl_processor_duration_seconds_bucket "
                        "[('le', '+Inf'), ('shard', 'shardId-000000000000')] 2.0"),
            std::string::npos)
      << parsed;
  EXPECT_NE(parsed.find("histogram kcl_processor_duration_seconds_sum "
                        "[('shard', 'shardId-000000000000')] 2.003"),
            std::string::npos)
      << parsed;
}

TEST(MetricsRegistry, LabelValuesAreEscapedAndNamesSanitized) {
  MetricsRegistry reg;
  MetricTag t[] = {{"odd key", "a\"b\\c\nd"}, {"operation", "renew"}};
  reg.count("custom.thing", 1, MetricTags(t, 2));
  std::string text = reg.prometheus_text();
  EXPECT_NE(text.find("kcl_custom_thing_total{odd_key=\"a\\\"b\\\\c\\nd\",operation=\"renew\"} 1"),
            std::string::npos)
      << text;
  std::string parsed = parse_with_prometheus_client(
      text,
      "s = fams[0].samples[0]\n"
      "print(repr(s.labels['odd_key']), s.labels['operation'], fams[0].type)\n");
  EXPECT_EQ(parsed, "'a\"b\\\\c\\nd' renew counter\n");
  EXPECT_EQ(sanitize_label_name("9lives"), "_lives");
  EXPECT_EQ(sanitize_label_name("__x"), "x__x");
}

TEST(MetricsRegistry, ForgottenGaugesLeaveTheExpositionUntilSetAgain) {
  MetricsRegistry reg;
  MetricTag a[] = {{"shard", "shardId-000000000000"}, {"stream", "orders"}};
  MetricTag b[] = {{"shard", "shardId-000000000001"}, {"stream", "orders"}};
  reg.gauge("consumer.millis_behind_latest", 400000, MetricTags(a, 2));
  reg.gauge("consumer.millis_behind_latest", 0, MetricTags(b, 2));
  reg.count("consumer.records_processed", 3, MetricTags(a, 2));
  reg.forget(MetricTags(a, 2));
  std::string text = reg.prometheus_text();
  EXPECT_EQ(text.find("shard=\"shardId-000000000000\",stream=\"orders\"} 400000"),
            std::string::npos)
      << "the lag of a shard no longer read here is gone: " << text;
  EXPECT_NE(text.find("shard=\"shardId-000000000001\",stream=\"orders\"} 0\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("kcl_records_processed_total{shard=\"shardId-000000000000\""),
            std::string::npos)
      << "counters stay: " << text;
  reg.gauge("consumer.millis_behind_latest", 5, MetricTags(a, 2));
  text = reg.prometheus_text();
  EXPECT_NE(text.find("shard=\"shardId-000000000000\",stream=\"orders\"} 5\n"), std::string::npos)
      << "set again: reported again: " << text;
}

TEST(MetricsRegistry, NegativeCountsAreDropped) {
  MetricsRegistry reg;
  reg.count("leases.taken", 2, {});
  reg.count("leases.taken", -1, {});
  EXPECT_NE(reg.prometheus_text().find("kcl_leases_taken_total 2\n"), std::string::npos);
}

TEST(MetricsRegistry, ConcurrentWritersAndScrapesAgree) {
  MetricsRegistry reg;
  constexpr int kThreads = 4;
  constexpr int kEach = 20000;
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    while (!stop.load()) {
      std::string text = reg.prometheus_text();
      ASSERT_FALSE(text.empty() && false);
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      std::string shard = "shard-" + std::to_string(t % 2);
      MetricTag tag{"shard", shard};
      for (int i = 0; i < kEach; ++i) {
        reg.count("consumer.records_processed", 1, MetricTags(&tag, 1));
        reg.timing("processor.process_records", 1ms, MetricTags(&tag, 1));
      }
    });
  }
  for (auto& w : writers) w.join();
  stop.store(true);
  scraper.join();
  double total = 0;
  std::uint64_t timings = 0;
  for (const auto& s : reg.snapshot()) {
    if (s.family == "kcl_records_processed_total") total += s.value;
    if (s.family == "kcl_processor_duration_seconds") timings += s.count;
  }
  EXPECT_EQ(total, kThreads * kEach);
  EXPECT_EQ(timings, static_cast<std::uint64_t>(kThreads * kEach));
}

}  // namespace
}  // namespace kcl::metrics
