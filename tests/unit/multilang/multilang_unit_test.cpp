// kcl multilang's parts: the properties file, the child's command line, and the protocol
// with scripted children (small Python programs): checkpoints answered with the Java error
// names, a child that never answers, one that stops reading, one that exits, lines that are
// not messages, and what a child inherits.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kcl/multilang.h"
#include "multilang/multilang_processor.h"
#include "multilang/properties.h"
#include "support/captured_log.h"
#include "support/emulators.h"

namespace kcl::multilang {
namespace {

using namespace std::chrono_literals;

TEST(PropertiesTest, ReadsJavaStylePropertiesFiles) {
  auto p = parse_properties(
      "# comment\n! another\nexecutableName = python3 sample.py\nstreamName: orders\n"
      "applicationName=audit\nlong = a \\\n   b\n\n",
      "app.properties");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->at("executableName"), "python3 sample.py");
  EXPECT_EQ(p->at("streamName"), "orders");
  EXPECT_EQ(p->at("applicationName"), "audit");
  EXPECT_EQ(p->at("long"), "a b");
  auto escaped = parse_properties("path = C\\:\\\\tmp\nname = caf\\u00e9\\tbar\n", "e.properties");
  ASSERT_TRUE(escaped.ok()) << escaped.status();
  EXPECT_EQ(escaped->at("path"), "C:\\tmp");
  EXPECT_EQ(escaped->at("name"), "caf\xc3\xa9\tbar");
  auto bad = parse_properties("ok = 1\nno separator here\n", "x.properties");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x.properties line 2"), std::string::npos) << bad.status();
}

TEST(PropertiesTest, BuildsTheWorkerAndNamesEveryProblem) {
  auto ok = settings_from_properties({{"executableName", "node 'my app.js' --fast"},
                                      {"streamName", "orders"},
                                      {"applicationName", "audit"},
                                      {"initialPositionInStream", "TRIM_HORIZON"},
                                      {"failoverTimeMillis", "4000"},
                                      {"maxRecords", "500"},
                                      {"timeoutInSeconds", "7"},
                                      {"retrievalMode", "FANOUT"},
                                      {"metricsLevel", "NONE"}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->child.command, (std::vector<std::string>{"node", "my app.js", "--fast"}));
  EXPECT_EQ(ok->worker.stream_name, "orders");
  EXPECT_EQ(ok->worker.leases.application_name, "audit");
  EXPECT_EQ(ok->worker.initial_position.kind, StartPosition::Kind::kTrimHorizon);
  EXPECT_EQ(ok->worker.leases.failover_time, 4000ms);
  EXPECT_EQ(ok->worker.retrieval.max_records_per_call, 500);
  EXPECT_EQ(ok->child.response_timeout, 7s);
  EXPECT_EQ(ok->worker.retrieval.mode, RetrievalMode::kFanOut);
  EXPECT_EQ(ok->ignored_keys, (std::vector<std::string>{"metricsLevel"}));
  auto by_arn = settings_from_properties(
      {{"executableName", "python3 p.py"},
       {"streamArn", "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"},
       {"applicationName", "audit"},
       {"tableName", "audit-leases"},
       {"AWSCredentialsProvider", "DefaultAWSCredentialsProviderChain"}});
  ASSERT_TRUE(by_arn.ok()) << by_arn.status();
  EXPECT_EQ(by_arn->worker.stream_name, "orders");
  EXPECT_EQ(by_arn->worker.aws.region, "eu-west-1");
  EXPECT_EQ(by_arn->worker.leases.table_name, "audit-leases");
  EXPECT_TRUE(by_arn->ignored_keys.empty()) << "the credentials provider key is understood";
  auto bad = settings_from_properties(
      {{"streamName", "orders"}, {"maxRecords", "lots"}, {"initialPositionInStream", "SOON"}});
  ASSERT_FALSE(bad.ok());
  for (const char* what : {"executableName is required", "applicationName is required",
                           "maxRecords = 'lots'", "initialPositionInStream = 'SOON'"}) {
    EXPECT_NE(bad.status().message().find(what), std::string::npos) << bad.status();
  }
}

// streamArn is read field by field: the region of any partition's ARN (aws-cn, aws-us-gov),
// and a malformed ARN refused with what is wrong in it.
TEST(PropertiesTest, AStreamArnIsReadByItsFields) {
  const auto with_arn = [](const std::string& arn) {
    return settings_from_properties(
        {{"executableName", "python3 p.py"}, {"streamArn", arn}, {"applicationName", "audit"}});
  };
  for (const auto& [arn, region] : std::vector<std::pair<std::string, std::string>>{
           {"arn:aws:kinesis:eu-west-1:123456789012:stream/orders", "eu-west-1"},
           {"arn:aws-cn:kinesis:cn-north-1:123456789012:stream/orders", "cn-north-1"},
           {"arn:aws-us-gov:kinesis:us-gov-west-1:123456789012:stream/orders", "us-gov-west-1"}}) {
    auto s = with_arn(arn);
    ASSERT_TRUE(s.ok()) << arn << ": " << s.status();
    EXPECT_EQ(s->worker.stream_name, "orders") << arn;
    EXPECT_EQ(s->worker.aws.region, region) << arn;
  }
  for (const auto& [arn, why] : std::vector<std::pair<std::string, std::string>>{
           {"orders:stream/orders", "not six fields"},
           {"arn:aws:kinesis:eu-west-1:123456789012:stream/orders:extra", "not six fields"},
           {"arn:aws:sqs:eu-west-1:123456789012:stream/orders", "service 'sqs'"},
           {"arn:aws:kinesis::123456789012:stream/orders", "region ''"},
           {"arn:aws:kinesis:eu-west-1:1234:stream/orders", "account '1234'"},
           {"arn:aws:kinesis:eu-west-1:123456789012:table/orders", "resource 'table/orders'"},
           {"arn:aws:kinesis:eu-west-1:123456789012:stream/", "stream name is empty"}}) {
    auto s = with_arn(arn);
    ASSERT_FALSE(s.ok()) << arn << " was accepted as stream " << s->worker.stream_name
                         << " in region " << s->worker.aws.region;
    EXPECT_NE(s.status().message().find("is not a Kinesis stream ARN (" + why), std::string::npos)
        << s.status();
  }
}

// Poison records (kcl-cpp's own keys): the sink's file or stream and the attempts; the
// command makes the sink from them.
TEST(PropertiesTest, DeadLetterKeysNameTheSinkAndTheAttempts) {
  auto file = settings_from_properties({{"executableName", "python3 p.py"},
                                        {"streamName", "orders"},
                                        {"applicationName", "audit"},
                                        {"deadLetterFile", "/var/lib/audit/poison.jsonl"},
                                        {"maxAttemptsBeforeDeadLetter", "5"}});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->dead_letter_file, "/var/lib/audit/poison.jsonl");
  EXPECT_TRUE(file->dead_letter_stream.empty());
  EXPECT_EQ(file->worker.processing.max_attempts_before_dead_letter, 5);
  EXPECT_TRUE(file->ignored_keys.empty());
  auto stream = settings_from_properties({{"executableName", "python3 p.py"},
                                          {"streamName", "orders"},
                                          {"applicationName", "audit"},
                                          {"deadLetterStream", "orders-dlq"}});
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(stream->dead_letter_stream, "orders-dlq");
  auto bad = settings_from_properties({{"executableName", "python3 p.py"},
                                       {"streamName", "orders"},
                                       {"applicationName", "audit"},
                                       {"maxAttemptsBeforeDeadLetter", "0"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("maxAttemptsBeforeDeadLetter"), std::string::npos)
      << bad.status();
}

// Any worker option by its name (kcl/worker_options.h), in `kcl consume --option`'s text
// form, after the Java keys; the Java keys take the options' ranges.
TEST(PropertiesTest, OptionNamesAreKeysAndJavaKeysTakeTheOptionsRanges) {
  auto ok = settings_from_properties({{"executableName", "python3 p.py"},
                                      {"streamName", "orders"},
                                      {"applicationName", "audit"},
                                      {"failoverTimeMillis", "4000"},
                                      {"failover_time", "6s"},
                                      {"renew_interval", "1.5s"},
                                      {"billing_mode", "provisioned"},
                                      {"stall_threshold", ""}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->worker.leases.failover_time, 6000ms) << "the option's name wins";
  EXPECT_EQ(ok->worker.leases.renew_interval, 1500ms);
  EXPECT_EQ(ok->worker.leases.billing_mode, BillingMode::kProvisioned);
  EXPECT_EQ(ok->worker.processing.stall_threshold, 60000ms) << "an empty value is absent";
  EXPECT_TRUE(ok->ignored_keys.empty());
  auto bad = settings_from_properties({{"executableName", "python3 p.py"},
                                       {"streamName", "orders"},
                                       {"applicationName", "audit"},
                                       {"initialLeaseTableReadCapacity", "50000"},
                                       {"maxReadBytesPerSecond", "512"},
                                       {"failover_time", "3000"}});
  ASSERT_FALSE(bad.ok());
  for (const char* what :
       {"initialLeaseTableReadCapacity = '50000' is not a number between 1 and 40000",
        "maxReadBytesPerSecond = '512' is not a number between 1024 and",
        "option 'failover_time' = '3000': expected a duration with a unit"}) {
    EXPECT_NE(bad.status().message().find(what), std::string::npos) << bad.status();
  }
}

// The public reader (kcl/multilang.h), which the Python runner kcl.kclpy uses: the file's
// text to the worker's configuration, the child's command and the rest, or every problem.
TEST(PropertiesTest, ThePublicReaderTakesTheFileText) {
  auto ok = kcl::read_multilang_properties(
      "executableName = python3 -m app.main\nstreamName = orders\napplicationName = audit\n"
      "failoverTimeMillis = 4000\ntimeoutInSeconds = 7\ndeadLetterFile = /tmp/p.jsonl\n"
      "someFutureKey = 1\n",
      "app.properties");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->command, (std::vector<std::string>{"python3", "-m", "app.main"}));
  EXPECT_EQ(ok->worker.stream_name, "orders");
  EXPECT_EQ(ok->worker.leases.application_name, "audit");
  EXPECT_EQ(ok->worker.leases.failover_time, 4000ms);
  EXPECT_EQ(ok->response_timeout, 7000ms);
  EXPECT_EQ(ok->dead_letter_file, "/tmp/p.jsonl");
  EXPECT_EQ(ok->ignored_keys, (std::vector<std::string>{"someFutureKey"}));
  auto line = kcl::read_multilang_properties("streamName = s\nno separator\n", "bad.properties");
  ASSERT_FALSE(line.ok());
  EXPECT_EQ(line.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(line.status().message().find("bad.properties line 2"), std::string::npos)
      << line.status();
  auto keys = kcl::read_multilang_properties("streamName = s\n", "k.properties");
  ASSERT_FALSE(keys.ok());
  EXPECT_NE(keys.status().message().find("executableName is required"), std::string::npos);
  EXPECT_NE(keys.status().message().find("applicationName is required"), std::string::npos);
}

// streamNames (kcl-cpp's own): several streams through one lease table; one name is the
// same as streamName.
TEST(PropertiesTest, StreamNamesListsSeveralStreams) {
  auto two = settings_from_properties({{"executableName", "python3 p.py"},
                                       {"streamNames", " orders, payments ,"},
                                       {"applicationName", "audit"}});
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->worker.streams.size(), 2u);
  EXPECT_EQ(two->worker.streams[0].name, "orders");
  EXPECT_EQ(two->worker.streams[1].name, "payments");
  EXPECT_TRUE(two->worker.stream_name.empty());
  EXPECT_TRUE(two->worker.multi_stream());
  auto one = settings_from_properties(
      {{"executableName", "python3 p.py"}, {"streamNames", "orders"}, {"applicationName", "a"}});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->worker.stream_name, "orders");
  EXPECT_FALSE(one->worker.multi_stream());
}

// A minimal valid file's keys plus `extra`.
std::map<std::string, std::string> with_required(std::map<std::string, std::string> extra) {
  extra.emplace("executableName", "python3 p.py");
  extra.emplace("streamName", "orders");
  extra.emplace("applicationName", "audit");
  return extra;
}

TEST(PropertiesTest, InitialPositionInStreamExtendedIsEpochSeconds) {
  auto at =
      settings_from_properties(with_required({{"initialPositionInStream", "AT_TIMESTAMP"},
                                              {"initialPositionInStreamExtended", "1636609142"}}));
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->worker.initial_position.kind, StartPosition::Kind::kAtTimestamp);
  EXPECT_EQ(at->worker.initial_position.timestamp,
            std::chrono::system_clock::time_point(std::chrono::seconds(1636609142)))
      << "read as seconds, as the Java daemon multiplies it by 1000";
  // Milliseconds by mistake is reported, not taken as a date thousands of years away.
  auto ms = settings_from_properties(
      with_required({{"initialPositionInStream", "AT_TIMESTAMP"},
                     {"initialPositionInStreamExtended", "1636609142000"}}));
  ASSERT_FALSE(ms.ok());
  EXPECT_NE(ms.status().message().find("initialPositionInStreamExtended = '1636609142000'"),
            std::string::npos)
      << ms.status();
  EXPECT_NE(ms.status().message().find("epoch seconds"), std::string::npos) << ms.status();
  auto missing =
      settings_from_properties(with_required({{"initialPositionInStream", "AT_TIMESTAMP"}}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("needs initialPositionInStreamExtended (epoch seconds"),
            std::string::npos)
      << missing.status();
}

// The Java daemon upper-cases its enums' values, and has a DEFAULT retrieval mode: enhanced
// fan-out unless a polling key is set.
TEST(PropertiesTest, ChoicesAreReadInAnyCaseAndDefaultRetrievalFollowsTheJavaRule) {
  auto lower = settings_from_properties(
      with_required({{"initialPositionInStream", "trim_horizon"}, {"retrievalMode", "fanout"}}));
  ASSERT_TRUE(lower.ok()) << lower.status();
  EXPECT_EQ(lower->worker.initial_position.kind, StartPosition::Kind::kTrimHorizon);
  EXPECT_EQ(lower->worker.retrieval.mode, RetrievalMode::kFanOut);
  auto by_default = settings_from_properties(with_required({{"retrievalMode", "DEFAULT"}}));
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  EXPECT_EQ(by_default->worker.retrieval.mode, RetrievalMode::kFanOut);
  auto default_polling = settings_from_properties(
      with_required({{"retrievalMode", "Default"}, {"idleTimeBetweenReadsInMillis", "500"}}));
  ASSERT_TRUE(default_polling.ok()) << default_polling.status();
  EXPECT_EQ(default_polling->worker.retrieval.mode, RetrievalMode::kPolling);
  auto unset = settings_from_properties(with_required({}));
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->worker.retrieval.mode, RetrievalMode::kPolling)
      << "fan-out is billed: asked for by name";
  auto bad = settings_from_properties(with_required({{"retrievalMode", "push"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'push' is not FANOUT, POLLING or DEFAULT"),
            std::string::npos)
      << bad.status();
}

// Each shard's exchange with its child holds a pool thread while the child works: the pool
// is larger than a worker's default unless maxActiveThreads says otherwise, and the Java
// daemon's "no bound" (0 or less) is the most kcl-cpp runs. A long timeoutInSeconds is taken.
TEST(PropertiesTest, TheThreadPoolFitsChildrenAndJavasNoBoundIsTaken) {
  auto unset = settings_from_properties(with_required({}));
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->worker.processing.thread_pool_size, 64);
  for (const char* none : {"0", "-1"}) {
    auto unbounded = settings_from_properties(with_required({{"maxActiveThreads", none}}));
    ASSERT_TRUE(unbounded.ok()) << none << ": " << unbounded.status();
    EXPECT_EQ(unbounded->worker.processing.thread_pool_size, 256) << none;
  }
  auto eight = settings_from_properties(with_required({{"maxActiveThreads", "8"}}));
  ASSERT_TRUE(eight.ok()) << eight.status();
  EXPECT_EQ(eight->worker.processing.thread_pool_size, 8);
  auto hours = settings_from_properties(with_required({{"timeoutInSeconds", "7200"}}));
  ASSERT_TRUE(hours.ok()) << hours.status();
  EXPECT_EQ(hours->child.response_timeout, std::chrono::seconds(7200));
}

TEST(PropertiesTest, BooleanKeysAreValidatedAndUnsupportedValuesWarnOnce) {
  auto ok =
      settings_from_properties(with_required({{"callProcessRecordsEvenForEmptyRecordList", "FALSE"},
                                              {"cleanupLeasesUponShardCompletion", "True"}}));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->warnings.empty()) << ok->warnings.front();
  EXPECT_TRUE(ok->ignored_keys.empty());
  auto bad =
      settings_from_properties(with_required({{"callProcessRecordsEvenForEmptyRecordList", "yes"},
                                              {"cleanupLeasesUponShardCompletion", "0"}}));
  ASSERT_FALSE(bad.ok());
  for (const char* what :
       {"callProcessRecordsEvenForEmptyRecordList = 'yes' is not a boolean: use true or false",
        "cleanupLeasesUponShardCompletion = '0' is not a boolean: use true or false"}) {
    EXPECT_NE(bad.status().message().find(what), std::string::npos) << bad.status();
  }
  auto empty_batches =
      settings_from_properties(with_required({{"callProcessRecordsEvenForEmptyRecordList", "true"},
                                              {"cleanupLeasesUponShardCompletion", "false"}}));
  ASSERT_TRUE(empty_batches.ok()) << empty_batches.status();
  ASSERT_EQ(empty_batches->warnings.size(), 2u);
  EXPECT_NE(empty_batches->warnings[0].find(
                "callProcessRecordsEvenForEmptyRecordList = true is not supported"),
            std::string::npos)
      << empty_batches->warnings[0];
  EXPECT_NE(empty_batches->warnings[1].find("cleanupLeasesUponShardCompletion = false"),
            std::string::npos)
      << empty_batches->warnings[1];
}

TEST(PropertiesTest, JavaCredentialsProviderNamesMeanTheStandardChain) {
  for (const char* value :
       {"DefaultCredentialsProvider", "DefaultAWSCredentialsProviderChain",
        "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
        "com.amazonaws.auth.DefaultAWSCredentialsProviderChain",
        "EnvironmentVariableCredentialsProvider, InstanceProfileCredentialsProvider",
        "ContainerCredentialsProvider", "WebIdentityTokenFileCredentialsProvider"}) {
    for (const char* key : {"AwsCredentialsProvider", "AWSCredentialsProvider"}) {
      auto s = settings_from_properties(with_required({{key, value}}));
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_TRUE(s->warnings.empty()) << key << " = " << value << ": " << s->warnings.front();
      EXPECT_TRUE(s->ignored_keys.empty()) << key;
    }
  }
  auto profile = settings_from_properties(
      with_required({{"AwsCredentialsProvider", "ProfileCredentialsProvider|analytics"}}));
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->worker.aws.profile, "analytics");
  EXPECT_TRUE(profile->warnings.empty());
  auto sts = settings_from_properties(with_required(
      {{"AwsCredentialsProvider",
        "StsAssumeRoleCredentialsProvider|arn:aws:iam::123456789012:role/r|session"}}));
  ASSERT_TRUE(sts.ok()) << sts.status();
  ASSERT_EQ(sts->warnings.size(), 1u) << "one warning for a provider it does not understand";
  EXPECT_NE(sts->warnings[0].find("AwsCredentialsProvider = 'StsAssumeRoleCredentialsProvider|"),
            std::string::npos)
      << sts->warnings[0];
  EXPECT_NE(sts->warnings[0].find("standard credentials chain"), std::string::npos);
}

// A file laid out as the Java KCL's sample properties are: a comment above each key, many
// keys commented out, streamArn next to streamName, the KCL 3 keys left empty.
TEST(PropertiesTest, ReadsAFileShapedLikeTheJavaSample) {
  const std::string text =
      "# The processor: the daemon runs it once per shard and talks to it over\n"
      "# its standard input and output.\n"
      "executableName = python3 word_count.py --verbose\n"
      "\n"
      "# Stream by ARN (wins over streamName when both are set).\n"
      "streamArn = arn:aws:kinesis:eu-central-1:111122223333:stream/clicks\n"
      "streamName = ignored-when-the-arn-is-set\n"
      "\n"
      "# Also the lease table's name.\n"
      "applicationName = ClickCounter\n"
      "\n"
      "# Credentials for Kinesis, DynamoDB and CloudWatch.\n"
      "AwsCredentialsProvider = DefaultCredentialsProvider\n"
      "AwsCredentialsProviderDynamoDB = DefaultCredentialsProvider\n"
      "\n"
      "# Sent in the user agent only.\n"
      "processingLanguage = python/3.11\n"
      "\n"
      "initialPositionInStream = AT_TIMESTAMP\n"
      "# Seconds since the epoch.\n"
      "initialPositionInStreamExtended = 1700000000\n"
      "\n"
      "regionName = eu-central-1\n"
      "#failoverTimeMillis = 10000\n"
      "#workerId = \n"
      "shardSyncIntervalMillis = 30000\n"
      "maxRecords = 2500\n"
      "idleTimeBetweenReadsInMillis = 750\n"
      "maxReadBytesPerSecond = 1048576\n"
      "callProcessRecordsEvenForEmptyRecordList = false\n"
      "parentShardPollIntervalMillis = 5000\n"
      "cleanupLeasesUponShardCompletion = true\n"
      "taskBackoffTimeMillis = 500\n"
      "metricsBufferTimeMillis = 10000\n"
      "#validateSequenceNumberBeforeCheckpointing = true\n"
      "maxActiveThreads = 8\n"
      "\n"
      "################### KCL 3 ###################\n"
      "# clientVersionConfig =\n"
      "# coordinatorStateTableName =\n"
      "gracefulLeaseHandoffTimeoutMillis =\n"
      "# leaseAssignmentIntervalMillis = 20000\n";
  auto p = parse_properties(text, "clicks.properties");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->count("failoverTimeMillis"), 0u) << "a commented-out key is not read";
  EXPECT_EQ(p->at("gracefulLeaseHandoffTimeoutMillis"), "") << "a key with no value";
  auto s = settings_from_properties(*p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->child.command, (std::vector<std::string>{"python3", "word_count.py", "--verbose"}));
  EXPECT_EQ(s->worker.stream_name, "clicks");
  EXPECT_EQ(s->worker.leases.application_name, "ClickCounter");
  EXPECT_EQ(s->worker.aws.region, "eu-central-1");
  EXPECT_EQ(s->worker.initial_position.kind, StartPosition::Kind::kAtTimestamp);
  EXPECT_EQ(s->worker.initial_position.timestamp,
            std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)));
  EXPECT_EQ(s->worker.leases.failover_time, LeaseConfig{}.failover_time) << "default kept";
  EXPECT_EQ(s->worker.processing.shard_sync_interval, 30000ms);
  EXPECT_EQ(s->worker.retrieval.max_records_per_call, 2500);
  EXPECT_EQ(s->worker.retrieval.idle_time_between_calls, 750ms);
  EXPECT_EQ(s->worker.retrieval.max_read_bytes_per_second, std::size_t{1} << 20);
  EXPECT_EQ(s->worker.processing.parent_check_interval, 5000ms);
  EXPECT_EQ(s->worker.processing.thread_pool_size, 8);
  EXPECT_TRUE(s->warnings.empty()) << s->warnings.front();
  EXPECT_EQ(s->ignored_keys,
            (std::vector<std::string>{"gracefulLeaseHandoffTimeoutMillis",
                                      "metricsBufferTimeMillis", "taskBackoffTimeMillis"}));
}

// The lines of the file at `path` (what a scripted child wrote there).
std::vector<std::string> lines_in(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Records what the processor asks of the checkpointer; answers with `result`.
class FakeCheckpointer final : public Checkpointer {
 public:
  Status result;
  std::vector<std::string> calls;
  Status checkpoint() override {
    calls.push_back("last");
    return result;
  }
  Status checkpoint(const Record& r) override { return checkpoint(r.sequence_number(), 0); }
  Status checkpoint(std::string_view seq, SubSequenceNumber sub) override {
    calls.push_back(std::string(seq) + "#" + std::to_string(sub));
    return result;
  }
  Status prepare_checkpoint(std::string_view, SubSequenceNumber, std::string_view) override {
    return Status::Ok();
  }
  Status commit_prepared() override { return Status::Ok(); }
  ExtendedSequenceNumber last_checkpoint() const override {
    return ExtendedSequenceNumber::trim_horizon();
  }
};

class ScriptedChildTest : public ::testing::Test {
 protected:
  // A child running `body` (Python) for each message `m` (action `a`); `reply(obj)` writes a
  // line.
  ChildOptions child(const std::string& body) {
    const std::string path =
        ::testing::TempDir() + "/" + kcl::testing::unique_name("child") + ".py";
    std::ofstream(path) << "import json, sys, time\n"
                           "def reply(o):\n"
                           "    print(json.dumps(o), flush=True)\n"
                           "for line in sys.stdin:\n"
                           "    if not line.strip():\n"
                           "        continue\n"
                           "    m = json.loads(line)\n"
                           "    a = m['action']\n"
                        << body;
    ChildOptions o;
    o.command = {"python3", path};
    o.response_timeout = 2s;
    return o;
  }
  void init(MultiLangProcessor& p) {
    InitializationInput in;
    in.shard_id = "shardId-000000000001";
    p.initialize(in);
  }
  std::vector<Record> records() {
    Record r;
    r.set_sequence_number("49590338271490256608559692538361571095921575989136588898");
    r.set_data("hello");
    return {r};
  }
};

TEST_F(ScriptedChildTest, CheckpointsAreAnsweredWithTheJavaErrorNames) {
  const std::string seen = ::testing::TempDir() + "/" + kcl::testing::unique_name("errors");
  MultiLangProcessor p(child("    if a == 'processRecords':\n"
                             "        reply({'action': 'checkpoint', 'sequenceNumber': None})\n"
                             "        r = json.loads(sys.stdin.readline())\n"
                             "        open('" +
                             seen +
                             "', 'a').write(str(r['error']) + '\\n')\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  for (Status result : {Status::Ok(), Status(StatusCode::kLeaseLost, "gone"),
                        Status(StatusCode::kInvalidArgument, "before the checkpoint")}) {
    cp.result = result;
    p.process_records(ProcessRecordsInput{recs, cp, 0});
  }
  const std::vector<std::string> errors = lines_in(seen);
  EXPECT_EQ(errors,
            (std::vector<std::string>{"None", "ShutdownException", "IllegalArgumentException"}));
  EXPECT_EQ(cp.calls.size(), 3u);
  EXPECT_EQ(p.children_started(), 1);
}

TEST_F(ScriptedChildTest, AChildThatNeverAnswersIsStoppedAndReplaced) {
  MultiLangProcessor p(child("    if a == 'processRecords':\n"
                             "        time.sleep(60)\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  const auto start = std::chrono::steady_clock::now();
  try {
    p.process_records(ProcessRecordsInput{recs, cp, 0});
    FAIL() << "a child that never answers must fail the call";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("did not answer in time"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "bounded by the response timeout";
  // The next delivery starts a new child (which hangs again: the count shows the restart).
  EXPECT_THROW(p.process_records(ProcessRecordsInput{recs, cp, 0}), std::runtime_error);
  EXPECT_EQ(p.children_started(), 2);
}

TEST_F(ScriptedChildTest, AChildThatExitsIsReportedWithItsExitStatus) {
  MultiLangProcessor p(child("    if a == 'processRecords':\n"
                             "        sys.exit(3)\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  try {
    p.process_records(ProcessRecordsInput{recs, cp, 0});
    FAIL() << "a child that exits must fail the call";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("exit status 3"), std::string::npos) << e.what();
  }
}

TEST_F(ScriptedChildTest, AChildThatKeepsExitingIsLoggedOncePerSeriesWithItsCount) {
  auto log = std::make_shared<kcl::testing::CapturedLog>(LogLevel::kError);
  MultiLangProcessor p(child("    if a == 'processRecords':\n"
                             "        sys.exit(3)\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       log);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  for (int i = 0; i < 12; ++i) {
    EXPECT_THROW(p.process_records(ProcessRecordsInput{recs, cp, 0}), std::runtime_error);
  }
  EXPECT_EQ(p.children_started(), 12);
  const std::vector<std::string> lines = log->lines();
  ASSERT_EQ(lines.size(), 3u) << ::testing::PrintToString(lines);
  EXPECT_NE(lines[0].find("exit status 3"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("in a row"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("(failure 3 in a row)"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("(failure 10 in a row)"), std::string::npos) << lines[2];
}

TEST_F(ScriptedChildTest, ACheckpointDuringInitializeIsRefused) {
  const std::string seen = ::testing::TempDir() + "/" + kcl::testing::unique_name("init");
  MultiLangProcessor p(child("    if a == 'initialize':\n"
                             "        reply({'action': 'checkpoint', 'sequenceNumber': None})\n"
                             "        r = json.loads(sys.stdin.readline())\n"
                             "        open('" +
                             seen +
                             "', 'w').write(str(r['error']))\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  std::ifstream in(seen);
  std::string error;
  std::getline(in, error);
  EXPECT_EQ(error, "InvalidStateException");
}

TEST_F(ScriptedChildTest, ShardEndedCheckpointsShardEndAndLeaseLostRefusesCheckpoints) {
  const std::string seen = ::testing::TempDir() + "/" + kcl::testing::unique_name("ends");
  const std::string script =
      "    if a in ('shardEnded', 'leaseLost'):\n"
      "        reply({'action': 'checkpoint', 'sequenceNumber': None})\n"
      "        r = json.loads(sys.stdin.readline())\n"
      "        open('" +
      seen +
      "', 'a').write(a + ' ' + str(r['error']) + '\\n')\n"
      "    reply({'action': 'status', 'responseFor': a})\n";
  FakeCheckpointer cp;
  {
    MultiLangProcessor p(child(script), nullptr);
    init(p);
    p.shard_ended(cp);  // null sequence number inside shardEnded: SHARD_END
  }
  {
    MultiLangProcessor p(child(script), nullptr);
    init(p);
    p.lease_lost();
  }
  const std::vector<std::string> got = lines_in(seen);
  EXPECT_EQ(got, (std::vector<std::string>{"shardEnded None", "leaseLost InvalidStateException"}));
  EXPECT_EQ(cp.calls, (std::vector<std::string>{"last"})) << "one checkpoint: the shard's end";
}

TEST_F(ScriptedChildTest, AStatusForAnotherActionOrNoneIsAProtocolError) {
  // responseFor naming another action, or none at all (null): the child is out of step, and
  // the next delivery goes to a new one.
  const std::pair<std::string, std::string> cases[] = {{"'initialize'", "for initialize"},
                                                       {"None", "for null"}};
  for (const auto& [response_for, said] : cases) {
    MultiLangProcessor p(child("    if a == 'processRecords':\n"
                               "        reply({'action': 'status', 'responseFor': " +
                               response_for +
                               "})\n"
                               "        continue\n"
                               "    reply({'action': 'status', 'responseFor': a})\n"),
                         nullptr);
    init(p);
    FakeCheckpointer cp;
    auto recs = records();
    try {
      p.process_records(ProcessRecordsInput{recs, cp, 0});
      ADD_FAILURE() << "a status " << said << " must fail the call";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("with a status " + said), std::string::npos) << e.what();
    }
    EXPECT_THROW(p.process_records(ProcessRecordsInput{recs, cp, 0}), std::runtime_error);
    EXPECT_EQ(p.children_started(), 2) << "the child out of step was replaced";
  }
}

TEST_F(ScriptedChildTest, BlankLinesAndCrLfLineEndsAreTolerated) {
  // Every line the child writes ends with \r\n, and blank lines (empty, \r\n only, spaces)
  // come before and between its messages, as children on Windows or with chatty print
  // statements write them.
  const std::string seen = ::testing::TempDir() + "/" + kcl::testing::unique_name("crlf");
  MultiLangProcessor p(child("    def crlf(o):\n"
                             "        sys.stdout.write('\\n\\r\\n   \\r\\n' + json.dumps(o) + "
                             "'\\r\\n')\n"
                             "        sys.stdout.flush()\n"
                             "    if a == 'processRecords':\n"
                             "        crlf({'action': 'checkpoint', 'sequenceNumber': "
                             "m['records'][-1]['sequenceNumber']})\n"
                             "        r = json.loads(sys.stdin.readline())\n"
                             "        open('" +
                             seen +
                             "', 'a').write(str(r['error']) + ' ' + str(len(m['records'])) + "
                             "'\\n')\n"
                             "    crlf({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  p.process_records(ProcessRecordsInput{recs, cp, 0});
  p.process_records(ProcessRecordsInput{recs, cp, 0});
  p.shutdown_requested(cp);
  const std::vector<std::string> got = lines_in(seen);
  EXPECT_EQ(got, (std::vector<std::string>{"None 1", "None 1"}))
      << "both batches reached the child and its checkpoints were accepted";
  EXPECT_EQ(cp.calls, (std::vector<std::string>{std::string(recs[0].sequence_number()) + "#0",
                                                std::string(recs[0].sequence_number()) + "#0"}));
  EXPECT_EQ(p.children_started(), 1) << "the child was never taken for broken";
}

TEST_F(ScriptedChildTest, TheTimeoutBoundsEachMessageNotTheWholeBatch) {
  // Four checkpoints 0.8 s apart: 3.2 s in all against a 2 s timeout, each message well
  // within it (the Java daemon times each message).
  MultiLangProcessor p(child("    if a == 'processRecords':\n"
                             "        for i in range(4):\n"
                             "            time.sleep(0.8)\n"
                             "            reply({'action': 'checkpoint', 'sequenceNumber': None})\n"
                             "            json.loads(sys.stdin.readline())\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  const auto start = std::chrono::steady_clock::now();
  p.process_records(ProcessRecordsInput{recs, cp, 0});
  EXPECT_GT(std::chrono::steady_clock::now() - start, 3s) << "the batch took longer than 2 s";
  EXPECT_EQ(cp.calls.size(), 4u);
  EXPECT_EQ(p.children_started(), 1) << "a child that keeps checkpointing is not hung";
}

TEST_F(ScriptedChildTest, LinesThatAreNotMessagesAreSkippedAndLoggedOncePerSeries) {
  auto log = std::make_shared<kcl::testing::CapturedLog>(LogLevel::kWarn);
  // Before each status: a print, JSON that is not an object, an object without an action and
  // one with an action the protocol does not have (the Java daemon skips each).
  MultiLangProcessor p(
      child("    if a == 'processRecords':\n"
            "        print('processing', len(m['records']), 'records', flush=True)\n"
            "        print('[1, 2]', flush=True)\n"
            "        reply({'hello': 1})\n"
            "        reply({'action': 'debug', 'text': 'x'})\n"
            "    reply({'action': 'status', 'responseFor': a})\n"),
      log);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  for (int i = 0; i < 3; ++i) p.process_records(ProcessRecordsInput{recs, cp, 0});
  EXPECT_EQ(p.children_started(), 1) << "the child was never taken for broken";
  const std::vector<std::string> lines = log->lines();
  ASSERT_EQ(lines.size(), 3u) << "12 lines skipped: logged at the 1st, 3rd and 10th; "
                              << ::testing::PrintToString(lines);
  EXPECT_NE(lines[0].find("(1 line so far): processing 1 records"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("(3 lines so far)"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("(10 lines so far)"), std::string::npos) << lines[2];
}

TEST_F(ScriptedChildTest, AChildPrintingWhileTheDaemonWritesABatchDoesNotDeadlock) {
  // After initialize the child prints 200 KiB (more than a pipe holds) before it reads on,
  // while the daemon writes a batch larger than a pipe holds: each waits for the other unless
  // the daemon reads the child's output while it writes (the Java daemon does).
  auto log = std::make_shared<kcl::testing::CapturedLog>(LogLevel::kWarn);
  MultiLangProcessor p(child("    if a == 'initialize':\n"
                             "        reply({'action': 'status', 'responseFor': a})\n"
                             "        for i in range(2000):\n"
                             "            print('x' * 100)\n"
                             "        sys.stdout.flush()\n"
                             "        continue\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       log);
  init(p);
  FakeCheckpointer cp;
  std::vector<Record> recs = records();
  recs[0].set_data(std::string(300 << 10, 'y'));
  p.process_records(ProcessRecordsInput{recs, cp, 0});  // throws when the child was stuck
  EXPECT_EQ(p.children_started(), 1) << "the child was never taken for hung";
  const std::vector<std::string> lines = log->lines();
  ASSERT_FALSE(lines.empty()) << "the printed lines are skipped, and said so";
  EXPECT_NE(lines.back().find("lines so far"), std::string::npos) << lines.back();
}

TEST_F(ScriptedChildTest, AChildThatStopsReadingItsInputIsStoppedAndReplaced) {
  // It answers initialize, then reads nothing more: a batch larger than the pipe holds must
  // not block the shard's thread for ever.
  MultiLangProcessor p(child("    reply({'action': 'status', 'responseFor': a})\n"
                             "    time.sleep(60)\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  std::vector<Record> recs = records();
  recs[0].set_data(std::string(1 << 20, 'x'));
  const auto start = std::chrono::steady_clock::now();
  try {
    p.process_records(ProcessRecordsInput{recs, cp, 0});
    FAIL() << "a child that does not read must fail the call";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("did not read its input in time"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "bounded by the timeout";
}

TEST_F(ScriptedChildTest, SubSequenceNumbersAreReadAsTheJavaDaemonReadsThem) {
  const std::string seen = ::testing::TempDir() + "/" + kcl::testing::unique_name("subseq");
  MultiLangProcessor p(child("    if a == 'processRecords':\n"
                             "        for sub in (3, '4', -1, 'x'):\n"
                             "            reply({'action': 'checkpoint', 'sequenceNumber': '7', "
                             "'subSequenceNumber': sub})\n"
                             "            r = json.loads(sys.stdin.readline())\n"
                             "            open('" +
                             seen +
                             "', 'a').write(str(r['error']) + '\\n')\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  auto recs = records();
  p.process_records(ProcessRecordsInput{recs, cp, 0});
  EXPECT_EQ(cp.calls, (std::vector<std::string>{"7#3", "7#4"}));
  const std::vector<std::string> errors = lines_in(seen);
  EXPECT_EQ(errors, (std::vector<std::string>{"None", "None", "IllegalArgumentException",
                                              "IllegalArgumentException"}));
}

TEST_F(ScriptedChildTest, AChildGetsOnlyItsPipesAndTheDefaultSignals) {
  // What this process holds that a child must not get: a socket opened without
  // close-on-exec (as some libraries open theirs), and SIGPIPE ignored (as the daemon does).
  // The child is a shell (Python would ignore SIGPIPE itself): `ls` and `grep` show what
  // they inherited through it.
  signal(SIGPIPE, SIG_IGN);
  const int leaky = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(leaky, 0);
  const std::string seen = ::testing::TempDir() + "/" + kcl::testing::unique_name("inherit");
  ChildOptions o;
  o.command = {"sh", "-c",
               "read line; ls /proc/self/fd > " + seen + ".fds; grep -E '^Sig(Ign|Blk)' " +
                   "/proc/self/status > " + seen + ".sig; " +
                   "echo '{\"action\": \"status\", \"responseFor\": \"initialize\"}'; read line"};
  o.response_timeout = 5s;
  MultiLangProcessor p(o, nullptr);
  init(p);
  ::close(leaky);
  std::ifstream fds_in(seen + ".fds");
  std::set<int> fds;
  for (int fd; fds_in >> fd;) fds.insert(fd);
  // 0, 1, 2 and the descriptor ls opened to list them.
  EXPECT_EQ(fds, (std::set<int>{0, 1, 2, 3})) << "only its pipes (socket " << leaky << ")";
  std::ifstream sig_in(seen + ".sig");
  std::map<std::string, unsigned long long> sig;
  for (std::string name, mask; sig_in >> name >> mask;) sig[name] = std::stoull(mask, nullptr, 16);
  ASSERT_EQ(sig.size(), 2u);
  EXPECT_EQ(sig["SigIgn:"] & (1ULL << (SIGPIPE - 1)), 0u) << "SIGPIPE is not ignored in the child";
  EXPECT_EQ(sig["SigBlk:"], 0u) << "no signal blocked";
}

TEST_F(ScriptedChildTest, StderrLinesEndAtCarriageReturnsAndLongOnesAreLoggedInPieces) {
  // A progress bar rewriting its line (\r only), then 150 KB with no line end at all.
  auto log = std::make_shared<kcl::testing::CapturedLog>(LogLevel::kInfo);
  MultiLangProcessor p(child("    if a == 'initialize':\n"
                             "        sys.stderr.write('10%\\r20%\\r30%\\n')\n"
                             "        sys.stderr.write('y' * 150000)\n"
                             "        sys.stderr.flush()\n"
                             "    reply({'action': 'status', 'responseFor': a})\n"),
                       log);
  init(p);
  auto stderr_lines = [&] {
    std::vector<std::string> out;
    for (const std::string& l : log->lines()) {
      if (l.rfind("stderr: ", 0) == 0) out.push_back(l.substr(8, 40));
    }
    return out;
  };
  const std::string piece = std::string(40, 'y');
  const std::vector<std::string> want = {"10%", "20%", "30%", piece, piece};
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (stderr_lines() != want && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(stderr_lines(), want) << "three lines, then two 64 KiB pieces of the long one (the "
                                     "rest waits for its end)";
}

TEST_F(ScriptedChildTest, AChildWritingAtItsExitIsNotBlockedByAFullPipe) {
  // After its last status the child writes 1 MB to its stdout before it exits (more than the
  // pipe holds), then leaves a mark: a stop that drains the pipe lets it finish.
  const std::string mark = ::testing::TempDir() + "/" + kcl::testing::unique_name("exited");
  MultiLangProcessor p(child("    reply({'action': 'status', 'responseFor': a})\n"
                             "sys.stdout.write('x' * (1 << 20) + '\\n')\n"
                             "sys.stdout.flush()\n"
                             "open('" +
                             mark + "', 'w').close()\n"),
                       nullptr);
  init(p);
  FakeCheckpointer cp;
  p.shutdown_requested(cp);
  EXPECT_TRUE(std::ifstream(mark).good()) << "the child finished its exit before it was stopped";
}

}  // namespace
}  // namespace kcl::multilang
