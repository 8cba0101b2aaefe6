// RetrievalConfig::validate(): defaults are valid; every problem is reported, by name.
#include <gtest/gtest.h>

#include <functional>

#include "kcl/retrieval_config.h"

namespace kcl {
namespace {

using namespace std::chrono_literals;

bool mentions(const std::vector<std::string>& problems, std::string_view word) {
  for (const auto& p : problems) {
    if (p.find(word) != std::string::npos) return true;
  }
  return false;
}

TEST(FetcherConfigTest, DefaultsAreValidAndAsDocumented) {
  RetrievalConfig c;
  EXPECT_TRUE(c.validate().empty());
  EXPECT_EQ(c.max_records_per_call, 10000);
  EXPECT_EQ(c.min_call_interval, 250ms);
  EXPECT_EQ(c.idle_time_between_calls, 1s);
  EXPECT_EQ(c.max_read_bytes_per_second, 2u * 1024 * 1024);
  EXPECT_EQ(c.max_prefetch_records, 10000u);
  EXPECT_EQ(c.max_prefetch_bytes, std::size_t{8} << 20);
  EXPECT_EQ(c.throttle_backoff_base, 200ms);
  EXPECT_EQ(c.throttle_backoff_max, 10s);
  EXPECT_EQ(c.get_records_timeout, 30s);
  EXPECT_EQ(c.iterator_request_timeout, 10s);
  EXPECT_EQ(c.call_max_attempts, 1);
  EXPECT_EQ(c.fanout_resubscribe_jitter, 250ms);
}

TEST(FetcherConfigTest, EachBadFieldIsNamed) {
  struct Case {
    const char* field;
    std::function<void(RetrievalConfig&)> breaks;
  };
  const std::vector<Case> cases = {
      {"max_records_per_call", [](RetrievalConfig& c) { c.max_records_per_call = 0; }},
      {"max_records_per_call", [](RetrievalConfig& c) { c.max_records_per_call = 10001; }},
      {"min_call_interval", [](RetrievalConfig& c) { c.min_call_interval = -1ms; }},
      {"min_call_interval", [](RetrievalConfig& c) { c.min_call_interval = 61s; }},
      {"idle_time_between_calls", [](RetrievalConfig& c) { c.idle_time_between_calls = -5ms; }},
      // Past a shard iterator's 5-minute life: at LATEST every record would be skipped.
      {"idle_time_between_calls", [](RetrievalConfig& c) { c.idle_time_between_calls = 5min; }},
      {"max_read_bytes_per_second", [](RetrievalConfig& c) { c.max_read_bytes_per_second = 1023; }},
      {"max_prefetch_records", [](RetrievalConfig& c) { c.max_prefetch_records = 0; }},
      {"max_prefetch_bytes", [](RetrievalConfig& c) { c.max_prefetch_bytes = 0; }},
      {"throttle_backoff_base", [](RetrievalConfig& c) { c.throttle_backoff_base = 0ms; }},
      {"throttle_backoff_max", [](RetrievalConfig& c) { c.throttle_backoff_max = 100ms; }},
      {"throttle_backoff_max", [](RetrievalConfig& c) { c.throttle_backoff_max = 5min; }},
      {"get_records_timeout", [](RetrievalConfig& c) { c.get_records_timeout = 10ms; }},
      {"iterator_request_timeout", [](RetrievalConfig& c) { c.iterator_request_timeout = 0ms; }},
      {"call_max_attempts", [](RetrievalConfig& c) { c.call_max_attempts = 21; }},
      {"fanout_resubscribe_jitter", [](RetrievalConfig& c) { c.fanout_resubscribe_jitter = -1ms; }},
      {"fanout_resubscribe_jitter", [](RetrievalConfig& c) { c.fanout_resubscribe_jitter = 11s; }},
  };
  for (const auto& tc : cases) {
    RetrievalConfig c;
    tc.breaks(c);
    const auto problems = c.validate();
    ASSERT_EQ(problems.size(), 1u) << tc.field;
    EXPECT_TRUE(mentions(problems, tc.field)) << problems[0];
  }
}

TEST(FetcherConfigTest, EveryProblemIsReportedAtOnce) {
  RetrievalConfig c;
  c.max_records_per_call = -3;
  c.max_prefetch_records = 0;
  c.get_records_timeout = 0ms;
  const auto problems = c.validate();
  EXPECT_EQ(problems.size(), 3u);
  EXPECT_TRUE(mentions(problems, "max_records_per_call is -3"));
  EXPECT_TRUE(mentions(problems, "between 1 and 10000"));
}

TEST(FetcherConfigTest, ByteRateIsOffAtZeroOrAtLeastOneKiB) {
  RetrievalConfig c;
  c.max_read_bytes_per_second = 0;
  EXPECT_TRUE(c.validate().empty());
  c.max_read_bytes_per_second = 1024;
  EXPECT_TRUE(c.validate().empty());
  c.max_read_bytes_per_second = 1;
  const auto problems = c.validate();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(mentions(problems, "max_read_bytes_per_second is 1;")) << problems[0];
}

}  // namespace
}  // namespace kcl
