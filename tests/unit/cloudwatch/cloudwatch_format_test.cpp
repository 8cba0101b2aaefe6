// CloudWatch publishing's pure parts: the Java KCL names and levels, aggregation into
// statistic sets, EMF lines checked against the format's required structure, and
// PutMetricData bodies split at the API's limits.
#include "cloudwatch/cloudwatch_format.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cloudwatch/cloudwatch_metrics.h"

namespace kcl::cloudwatch {
namespace {

using namespace std::chrono_literals;

CloudWatchMetricsConfig config_at(MetricsLevel level) {
  CloudWatchMetricsConfig c;
  c.level = level;
  return c;
}

const Datum* find(const std::vector<Datum>& ds, const std::string& name,
                  const std::string& shard = "") {
  for (const Datum& d : ds) {
    if (d.name == name && d.shard_id == shard) return &d;
  }
  return nullptr;
}

TEST(CloudWatchAggregatorTest, MapsPointsToJavaNamesAndAggregatesStatisticSets) {
  CloudWatchAggregator agg(config_at(MetricsLevel::kDetailed));
  const MetricTag a{"shard", "shardId-1"};
  agg.count("consumer.records_processed", 10, MetricTags(&a, 1));
  agg.count("consumer.records_processed", 30, MetricTags(&a, 1));
  agg.timing("processor.process_records", 2ms, MetricTags(&a, 1));
  agg.timing("processor.process_records", 6ms, MetricTags(&a, 1));
  agg.gauge("leases.held", 4, {});
  const MetricTag aws_tags[] = {
      {"service", "Kinesis"}, {"operation", "GetRecords"}, {"outcome", "ok"}};
  agg.count("aws.requests", 1, MetricTags(aws_tags, 3));
  auto ds = agg.drain();
  const Datum* rp = find(ds, "RecordsProcessed", "shardId-1");
  ASSERT_TRUE(rp);
  EXPECT_EQ(rp->operation, "ProcessTask");
  EXPECT_EQ(rp->unit, "Count");
  EXPECT_EQ(rp->count, 2);
  EXPECT_EQ(rp->sum, 40);
  EXPECT_EQ(rp->min, 10);
  EXPECT_EQ(rp->max, 30);
  const Datum* t = find(ds, "RecordProcessor.processRecords.Time", "shardId-1");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->unit, "Milliseconds");
  EXPECT_DOUBLE_EQ(t->min, 2);
  EXPECT_DOUBLE_EQ(t->max, 6);
  const Datum* held = find(ds, "CurrentLeases");
  ASSERT_TRUE(held);
  EXPECT_EQ(held->operation, "RenewAllLeases");
  const Datum* generic = find(ds, "aws.requests.Kinesis.GetRecords.ok");
  ASSERT_TRUE(generic) << "a point without a Java name is published at DETAILED";
  EXPECT_EQ(generic->operation, "aws");
  auto again = agg.drain();
  ASSERT_EQ(again.size(), 1u) << "counts and timings drained; the gauge carried";
  EXPECT_EQ(again[0].name, "CurrentLeases");
}

// Leases held is set only when it changes (a take, a release, a loss) and an idle shard's lag
// only when a batch comes: every interval still carries their last value, as the Java KCL
// publishes CurrentLeases every renewal, until the shard's consumer ends (forget).
TEST(CloudWatchAggregatorTest, AGaugeIsPublishedEveryIntervalUntilForgotten) {
  CloudWatchAggregator agg(config_at(MetricsLevel::kSummary));
  const MetricTag shard[] = {{"shard", "shardId-1"}};
  agg.gauge("leases.held", 3, {});
  agg.gauge("consumer.millis_behind_latest", 500, MetricTags(shard, 1));
  agg.gauge("consumer.millis_behind_latest", 100, MetricTags(shard, 1));
  agg.count("consumer.records_processed", 7, MetricTags(shard, 1));
  auto first = agg.drain();
  ASSERT_TRUE(find(first, "CurrentLeases"));
  ASSERT_TRUE(find(first, "MillisBehindLatest", "shardId-1"));
  EXPECT_EQ(find(first, "MillisBehindLatest", "shardId-1")->count, 2);
  ASSERT_TRUE(find(first, "RecordsProcessed", "shardId-1"));

  for (int interval = 2; interval <= 3; ++interval) {
    auto ds = agg.drain();
    const Datum* held = find(ds, "CurrentLeases");
    ASSERT_TRUE(held) << "interval " << interval << ": the last value is carried";
    EXPECT_TRUE(held->level);
    EXPECT_EQ(held->count, 1);
    EXPECT_EQ(held->sum, 3);
    EXPECT_EQ(held->min, 3);
    EXPECT_EQ(held->max, 3);
    const Datum* lag = find(ds, "MillisBehindLatest", "shardId-1");
    ASSERT_TRUE(lag) << "interval " << interval;
    EXPECT_EQ(lag->count, 1);
    EXPECT_EQ(lag->sum, 100) << "the last value, not the interval's mean";
    EXPECT_FALSE(find(ds, "RecordsProcessed", "shardId-1")) << "counts reset every interval";
  }

  // Set again: the interval has its own points only.
  agg.gauge("leases.held", 5, {});
  agg.gauge("leases.held", 7, {});
  auto set_again = agg.drain();
  ASSERT_TRUE(find(set_again, "CurrentLeases"));
  EXPECT_EQ(find(set_again, "CurrentLeases")->count, 2);
  EXPECT_EQ(find(set_again, "CurrentLeases")->sum, 12);
  EXPECT_EQ(find(agg.drain(), "CurrentLeases")->sum, 7);

  // The shard's consumer ended: its gauges stop; the worker's do not.
  agg.forget(MetricTags(shard, 1));
  auto after = agg.drain();
  EXPECT_FALSE(find(after, "MillisBehindLatest", "shardId-1"));
  EXPECT_TRUE(find(after, "CurrentLeases"));
  // Set again after being forgotten: published again.
  agg.gauge("consumer.millis_behind_latest", 0, MetricTags(shard, 1));
  EXPECT_TRUE(find(agg.drain(), "MillisBehindLatest", "shardId-1"));
  EXPECT_TRUE(find(agg.drain(), "MillisBehindLatest", "shardId-1"));
  // A tag every given tag must match; a gauge without it stays.
  const MetricTag other[] = {{"shard", "shardId-1"}, {"stream", "orders"}};
  agg.forget(MetricTags(other, 2));
  EXPECT_TRUE(find(agg.drain(), "MillisBehindLatest", "shardId-1"));
  agg.forget(MetricTags(shard, 1));
  EXPECT_FALSE(find(agg.drain(), "MillisBehindLatest", "shardId-1"));
}

// Without the ShardId dimension the shards' lags share a series: it carries each shard's
// last value, and forgetting one shard leaves the others'.
TEST(CloudWatchAggregatorTest, AGaugeSharedByShardsCarriesEachShardsLastValue) {
  CloudWatchMetricsConfig c = config_at(MetricsLevel::kSummary);
  c.shard_id_dimension = false;
  CloudWatchAggregator agg(c);
  const MetricTag a{"shard", "shardId-1"}, b{"shard", "shardId-2"};
  agg.gauge("consumer.millis_behind_latest", 100, MetricTags(&a, 1));
  agg.gauge("consumer.millis_behind_latest", 300, MetricTags(&b, 1));
  agg.drain();
  auto ds = agg.drain();
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].count, 2);
  EXPECT_EQ(ds[0].min, 100);
  EXPECT_EQ(ds[0].max, 300);
  agg.forget(MetricTags(&b, 1));
  ds = agg.drain();
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].count, 1);
  EXPECT_EQ(ds[0].max, 100);
  agg.forget(MetricTags(&a, 1));
  EXPECT_TRUE(agg.drain().empty());
}

TEST(CloudWatchAggregatorTest, LevelsFilterAsTheJavaKcl) {
  CloudWatchAggregator summary(config_at(MetricsLevel::kSummary));
  summary.count("consumer.records_processed", 1, {});
  summary.timing("leases.renew_latency", 1ms, {});  // DETAILED
  summary.count("aws.requests", 1, {});             // no Java name: DETAILED
  auto ds = summary.drain();
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].name, "RecordsProcessed");
  CloudWatchAggregator none(config_at(MetricsLevel::kNone));
  none.count("consumer.records_processed", 1, {});
  EXPECT_TRUE(none.drain().empty());
}

TEST(CloudWatchAggregatorTest, SeriesAreBoundedAndShardDimensionCanBeOff) {
  CloudWatchMetricsConfig c;
  c.max_series = 100;
  CloudWatchAggregator agg(c);
  for (int i = 0; i < 150; ++i) {
    const std::string shard = "shardId-" + std::to_string(i);
    const MetricTag tag{"shard", shard};
    agg.count("consumer.records_processed", 1, MetricTags(&tag, 1));
  }
  EXPECT_EQ(agg.drain().size(), 100u);
  EXPECT_EQ(agg.dropped(), 50u);
  c.shard_id_dimension = false;
  CloudWatchAggregator flat(c);
  for (int i = 0; i < 150; ++i) {
    const std::string shard = "shardId-" + std::to_string(i);
    const MetricTag tag{"shard", shard};
    flat.count("consumer.records_processed", 1, MetricTags(&tag, 1));
  }
  auto ds = flat.drain();
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].sum, 150);
  EXPECT_TRUE(ds[0].shard_id.empty());
}

// The structure the EMF specification requires of a document.
void expect_valid_emf(const std::string& line) {
  auto doc = nlohmann::json::parse(line, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << line;
  ASSERT_TRUE(doc.contains("_aws") && doc["_aws"].is_object());
  const auto& meta = doc["_aws"];
  ASSERT_TRUE(meta.contains("Timestamp") && meta["Timestamp"].is_number_integer());
  ASSERT_TRUE(meta.contains("CloudWatchMetrics") && meta["CloudWatchMetrics"].is_array());
  for (const auto& directive : meta["CloudWatchMetrics"]) {
    ASSERT_TRUE(directive["Namespace"].is_string());
    const std::string ns = directive["Namespace"];
    EXPECT_FALSE(ns.empty());
    EXPECT_LE(ns.size(), 255u);
    ASSERT_TRUE(directive["Dimensions"].is_array());
    for (const auto& set : directive["Dimensions"]) {
      ASSERT_TRUE(set.is_array());
      EXPECT_LE(set.size(), 30u);
      for (const auto& d : set) {
        ASSERT_TRUE(d.is_string());
        ASSERT_TRUE(doc.contains(d.get<std::string>())) << "dimension " << d << " has no member";
        EXPECT_TRUE(doc[d.get<std::string>()].is_string());
      }
    }
    ASSERT_TRUE(directive["Metrics"].is_array());
    EXPECT_LE(directive["Metrics"].size(), 100u);
    for (const auto& m : directive["Metrics"]) {
      ASSERT_TRUE(m["Name"].is_string());
      const std::string name = m["Name"];
      EXPECT_FALSE(name.empty());
      EXPECT_LE(name.size(), 1024u);
      ASSERT_TRUE(doc.contains(name)) << "metric " << name << " has no member";
      EXPECT_TRUE(doc[name].is_number());
      if (m.contains("Unit")) {
        EXPECT_TRUE(m["Unit"].is_string());
      }
    }
  }
}

TEST(EmfTest, LinesFollowTheSpecificationAndCarrySumsAndMeans) {
  std::vector<Datum> ds;
  for (int i = 0; i < 250; ++i) {
    ds.push_back({"aws", "metric-" + std::to_string(i), "Count", "", 2, 7, 3, 4});
  }
  ds.push_back({"ProcessTask", "RecordsProcessed", "Count", "shardId-1", 3, 300, 50, 150});
  ds.push_back({"ProcessTask", "MillisBehindLatest", "Milliseconds", "shardId-1", 4, 40, 5, 20});
  PublishContext ctx{"orders-app", "worker-1", std::chrono::system_clock::time_point(1700000000s)};
  auto lines = emf_lines(ds, ctx);
  ASSERT_EQ(lines.size(), 4u) << "250 metrics of one group: 3 lines of at most 100; 1 more";
  for (const std::string& l : lines) {
    expect_valid_emf(l);
    EXPECT_EQ(l.find('\n'), std::string::npos);
  }
  bool seen = false;
  for (const std::string& l : lines) {
    auto doc = nlohmann::json::parse(l);
    EXPECT_EQ(doc["_aws"]["Timestamp"], 1700000000000LL);
    EXPECT_EQ(doc["WorkerIdentifier"], "worker-1");
    if (doc.contains("RecordsProcessed")) {
      seen = true;
      EXPECT_EQ(doc["RecordsProcessed"], 300) << "a count carries its sum";
      EXPECT_EQ(doc["MillisBehindLatest"], 10) << "a time or level its mean";
      EXPECT_EQ(doc["ShardId"], "shardId-1");
      EXPECT_EQ(doc["Operation"], "ProcessTask");
      EXPECT_EQ(doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0],
                nlohmann::json::array({"Operation", "ShardId", "WorkerIdentifier"}));
    }
  }
  EXPECT_TRUE(seen);
}

// A dimension value that is not UTF-8 (a worker id or a name from elsewhere) gives a line with
// U+FFFD in its place; it threw on the publishing thread.
TEST(EmfTest, BytesThatAreNotUtf8InADimensionAreReplacedNotThrown) {
  std::vector<Datum> ds = {{"ProcessTask", "RecordsProcessed", "Count", "shard\xff", 1, 1, 1, 1}};
  PublishContext ctx{"orders-app", "worker-\xfe",
                     std::chrono::system_clock::time_point(1700000000s)};
  std::vector<std::string> lines;
  ASSERT_NO_THROW(lines = emf_lines(ds, ctx));
  ASSERT_EQ(lines.size(), 1u);
  const auto doc = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(doc["WorkerIdentifier"], "worker-\xef\xbf\xbd");
}

TEST(EmfTest, ALevelCountedInCountsCarriesItsMeanNotTheSumOfItsSamples) {
  // Leases held (CurrentLeases, unit Count) reported three times in an interval.
  CloudWatchMetricsConfig config;
  CloudWatchAggregator agg(config);
  for (double held : {8.0, 10.0, 12.0}) agg.gauge("leases.held", held, {});
  agg.count("consumer.records_processed", 5, {});
  agg.count("consumer.records_processed", 7, {});
  PublishContext ctx{"orders-app", "worker-1", std::chrono::system_clock::time_point(1700000000s)};
  bool seen = false;
  for (const std::string& l : emf_lines(agg.drain(), ctx)) {
    auto doc = nlohmann::json::parse(l);
    if (doc.contains("CurrentLeases")) {
      seen = true;
      EXPECT_EQ(doc["CurrentLeases"], 10) << "the mean of 8, 10 and 12, not their sum";
    }
    if (doc.contains("RecordsProcessed")) {
      EXPECT_EQ(doc["RecordsProcessed"], 12) << "a sum";
    }
  }
  EXPECT_TRUE(seen);
}

// A worker of several streams: shardId-000000000000 of two streams stays two series, each
// with a StreamId dimension in both formats (the Java KCL's MetricsUtil.addStreamId).
TEST(CloudWatchAggregatorTest, TheSameShardIdOfTwoStreamsStaysTwoSeriesWithAStreamId) {
  CloudWatchAggregator agg(config_at(MetricsLevel::kDetailed));
  for (const char* stream : {"orders", "payments"}) {
    const MetricTag tags[] = {{"shard", "shardId-000000000000"}, {"stream", stream}};
    agg.count("consumer.records_processed", stream[0] == 'o' ? 3 : 5, MetricTags(tags, 2));
    agg.count("fanout.resubscribes", 1, MetricTags(tags, 2));
  }
  auto ds = agg.drain();
  std::map<std::string, double> processed;
  for (const Datum& d : ds) {
    if (d.name == "RecordsProcessed") processed[d.stream] = d.sum;
    if (d.operation == "fanout") {
      EXPECT_EQ(d.name, "fanout.resubscribes") << "the stream is a dimension, not in the name";
    }
  }
  EXPECT_EQ(processed, (std::map<std::string, double>{{"orders", 3}, {"payments", 5}}));
  PublishContext ctx{"app", "worker-1", std::chrono::system_clock::time_point(1700000000s)};
  std::set<std::string> emf_streams;
  for (const std::string& l : emf_lines(ds, ctx)) {
    expect_valid_emf(l);
    auto doc = nlohmann::json::parse(l);
    if (!doc.contains("RecordsProcessed")) continue;
    emf_streams.insert(doc["StreamId"].get<std::string>());
    EXPECT_EQ(doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0],
              nlohmann::json::array({"Operation", "ShardId", "StreamId", "WorkerIdentifier"}));
  }
  EXPECT_EQ(emf_streams, (std::set<std::string>{"orders", "payments"}));
  const std::string body = put_metric_data_bodies(ds, ctx)[0].body;
  for (const char* stream : {"orders", "payments"}) {
    EXPECT_NE(body.find("Dimensions.member.3.Name=StreamId&MetricData.member."), std::string::npos);
    EXPECT_NE(body.find(std::string("Dimensions.member.3.Value=") + stream), std::string::npos);
  }
}

// A metric name CloudWatch refuses (over 255 characters, e.g. built from a long table name)
// would fail the whole call, and every metric with it: it is left out and named. Dimension
// values are printable ASCII of at most 1,024 characters, as the service takes them.
TEST(PutMetricDataBodyTest, ANameTooLongIsLeftOutAndValuesAreMadeAcceptable) {
  const std::string long_name = "dynamodb.write_units." + std::string(240, 't') + ".UpdateItem";
  std::vector<Datum> ds = {
      {"ProcessTask", "RecordsProcessed", "Count", "shard\x01\xff", 1, 1, 1, 1},
      {"", long_name, "Count", "", 1, 1, 1, 1},
      {"ProcessTask", "MillisBehindLatest", "Milliseconds", std::string(1500, 's'), 1, 1, 1, 1}};
  PublishContext ctx{"app", "", std::chrono::system_clock::time_point(1700000000s)};
  std::vector<std::string> dropped;
  auto bodies = put_metric_data_bodies(ds, ctx, kMaxDatumsPerCall, kMaxBytesPerCall, &dropped);
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_EQ(bodies[0].datums, 2u);
  EXPECT_EQ(dropped, std::vector<std::string>{long_name});
  EXPECT_EQ(bodies[0].body.find(long_name), std::string::npos);
  EXPECT_NE(bodies[0].body.find("Value=shard%3F%3F"), std::string::npos) << bodies[0].body;
  EXPECT_NE(bodies[0].body.find("Value=" + std::string(1024, 's')), std::string::npos);
  EXPECT_EQ(bodies[0].body.find(std::string(1025, 's')), std::string::npos);
}

TEST(PutMetricDataBodyTest, SplitsAtTheDatumAndByteLimitsAndEncodesValues) {
  std::vector<Datum> ds;
  for (int i = 0; i < 2500; ++i) {
    ds.push_back(
        {"ProcessTask", "RecordsProcessed", "Count", "shard " + std::to_string(i), 1, 1, 1, 1});
  }
  PublishContext ctx{"my app/ns", "", std::chrono::system_clock::time_point(1700000000s)};
  auto bodies = put_metric_data_bodies(ds, ctx);
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_EQ(bodies[0].datums, 1000u);
  EXPECT_EQ(bodies[2].datums, 500u);
  EXPECT_NE(bodies[0].body.find("Namespace=my%20app%2Fns"), std::string::npos);
  EXPECT_NE(bodies[0].body.find("MetricData.member.1000."), std::string::npos);
  EXPECT_EQ(bodies[0].body.find("MetricData.member.1001."), std::string::npos);
  EXPECT_NE(bodies[1].body.find("MetricData.member.1.Dimensions.member.2.Value=shard%201000"),
            std::string::npos);
  EXPECT_NE(bodies[0].body.find("Timestamp=2023-11-14T22%3A13%3A20Z"), std::string::npos);
  auto small = put_metric_data_bodies(ds, ctx, 1000, 20000);
  std::size_t total = 0;
  for (const auto& b : small) {
    EXPECT_LE(b.body.size(), 20000u);
    total += b.datums;
  }
  EXPECT_EQ(total, 2500u);
  EXPECT_GT(small.size(), 3u);
}

}  // namespace
}  // namespace kcl::cloudwatch
