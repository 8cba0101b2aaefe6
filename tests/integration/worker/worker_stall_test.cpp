// Stalled shards on kinesalite + dynalite, one test per cause the worker can see, each
// flagged within stall_threshold + 5 s of what is in the way beginning, with the right cause
// and detail in the log, /status.json, /readyz and kcl_shard_stalled; and a shard idle at the
// tip of the stream next to a stalled one is never flagged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/child_process.h"
#include "support/stall_test_support.h"
#include "support/worker_test_support.h"

namespace kcl::worker_test {
namespace {

using nlohmann::json;
using stall_test::Gate;
using stall_test::TimedLog;

constexpr auto kThreshold = 2s;
// The goal: flagged within the threshold + 5 s of what is in the way beginning.
constexpr auto kFlaggedWithin = kThreshold + 5s;

class WorkerStallTest : public WorkerTest {
 protected:
  WorkerConfig stall_config(const std::string& id) const {
    WorkerConfig c = config(id);
    c.processing.stall_threshold = kThreshold;
    c.http_address = "127.0.0.1:0";
    return c;
  }

  std::unique_ptr<Worker> start(WorkerConfig c, std::shared_ptr<Script> script) {
    Dependencies deps;
    deps.logger = tlog_;
    auto f = factory(c.leases.worker_id, std::move(script));
    auto w = std::make_unique<Worker>(std::move(c), std::move(f), deps);
    Status s = w->start();
    EXPECT_TRUE(s.ok()) << s;
    return w;
  }

  // The shard ids of the stream, in order.
  std::vector<std::string> shard_ids() {
    std::vector<std::string> ids;
    for (const auto& s : shards()) ids.push_back(s.shard_id);
    return ids;
  }

  // Waits for the log line that flags `shard` stalled with `cause`; checks it came within
  // kFlaggedWithin of `began`.
  void expect_flagged(const std::string& shard, const std::string& cause, stall_test::Time began) {
    auto line = tlog_->wait_for({"shard " + shard + " stalled (" + cause + ")"}, 60s);
    ASSERT_TRUE(line.has_value()) << "not flagged; the log:\n" << tlog_->dump();
    const auto after = line->at - began;
    std::printf("[ note ] %s flagged %s after %.1f s (threshold %lld s): %s\n", shard.c_str(),
                cause.c_str(), std::chrono::duration<double>(after).count(),
                static_cast<long long>(std::chrono::seconds(kThreshold).count()),
                line->text.c_str());
    EXPECT_GE(after, kThreshold - 100ms);
    EXPECT_LE(after, kFlaggedWithin) << line->text;
  }

  std::shared_ptr<TimedLog> tlog_ = std::make_shared<TimedLog>();
};

TEST_F(WorkerStallTest, AProcessorCallbackRunningIsFlaggedAndAShardIdleAtTheTipIsNot) {
  create_stream(2);
  const auto ids = shard_ids();
  ASSERT_EQ(ids.size(), 2u);
  put_entries({{"held", "pk-held", "0"}, {"idle", "pk-idle", kHalfHashKey}});
  auto gate = std::make_shared<Gate>();
  auto script = std::make_shared<Script>();
  script->on_records = [&, gate](const std::string& shard, std::span<const Record>,
                                 Checkpointer& cp, int) {
    if (shard == ids[0]) gate->enter();
    (void)cp.checkpoint();
  };
  auto w = start(stall_config("w1"), script);
  const stall_test::ReleaseAtExit release{gate};  // before the worker stops, whatever happens
  const std::string url = w->http_url();
  const auto entered = gate->wait_entered(60s);
  ASSERT_TRUE(entered.has_value());
  expect_flagged(ids[0], "processor_callback", *entered);
  ASSERT_TRUE(wait_delivered("idle"));

  json stalled = stall_test::shard_stalled(url, ids[0]);
  ASSERT_TRUE(eventually(
      [&] { return !(stalled = stall_test::shard_stalled(url, ids[0])).is_null(); }, 10s));
  EXPECT_EQ(stalled["cause"], "processor_callback");
  EXPECT_NE(stalled["detail"].get<std::string>().find("process_records of shard " + ids[0]),
            std::string::npos)
      << stalled.dump();
  EXPECT_GT(stalled["since_ms"].get<std::int64_t>(), 0);
  EXPECT_TRUE(stall_test::shard_stalled(url, ids[1]).is_null());
  auto [code, body] = stall_test::http_get(url, "/readyz");
  EXPECT_EQ(code, 200);
  json ready = json::parse(body, nullptr, false);
  EXPECT_EQ(ready["status"], "degraded") << body;
  ASSERT_EQ(ready["stalled"].size(), 1u) << body;
  EXPECT_EQ(ready["stalled"][0]["shard"], ids[0]);
  EXPECT_EQ(ready["stalled"][0]["cause"], "processor_callback");
  auto gauge = stall_test::metric_value(
      url, "kcl_shard_stalled", {"shard=\"" + ids[0] + "\"", "cause=\"processor_callback\""});
  ASSERT_TRUE(gauge.has_value());
  EXPECT_EQ(*gauge, 1);

  // Reported again at the 3rd look, with how long it has lasted; by then the other shard has
  // been idle at the tip for longer than the threshold, and is not flagged.
  ASSERT_TRUE(tlog_->wait_for({"shard " + ids[0] + " still stalled", "(look 3)"}, 30s));
  EXPECT_FALSE(tlog_->find({"shard " + ids[1] + " stalled"})) << tlog_->dump();
  EXPECT_FALSE(stall_test::metric_value(url, "kcl_shard_stalled", {"shard=\"" + ids[1] + "\""}));

  gate->release();
  ASSERT_TRUE(tlog_->wait_for({"shard " + ids[0] + " no longer stalled (processor_callback"}, 30s));
  EXPECT_TRUE(eventually(
      [&] {
        return stall_test::http_get(url, "/readyz").second.find("\"ready\"") != std::string::npos;
      },
      10s));
  EXPECT_EQ(stall_test::metric_value(url, "kcl_shard_stalled",
                                     {"shard=\"" + ids[0] + "\"", "cause=\"processor_callback\""}),
            0.0);
  EXPECT_TRUE(stop(*w).ok());
}

TEST_F(WorkerStallTest, AChildWaitingOnItsParentNamesTheParentItsHolderAndItsCheckpoint) {
  create_stream(1);
  const std::string parent = shard_ids().front();
  put({"p0", "p1"});
  auto gate = std::make_shared<Gate>();
  auto script = std::make_shared<Script>();
  script->on_records = [&, gate](const std::string& shard, std::span<const Record>,
                                 Checkpointer& cp, int) {
    if (shard == parent) gate->enter();  // the parent never reaches its end
    (void)cp.checkpoint();
  };
  auto w = start(stall_config("w1"), script);
  const stall_test::ReleaseAtExit release{gate};  // before the worker stops, whatever happens
  ASSERT_TRUE(gate->wait_entered(60s));
  ASSERT_TRUE(kinesis_->split_shard(stream_, parent, kHalfHashKey).ok());
  ASSERT_TRUE(kinesis_->wait_for_active(stream_, 30s).ok());
  std::vector<std::string> children;
  for (const auto& id : shard_ids()) {
    if (id != parent) children.push_back(id);
  }
  ASSERT_EQ(children.size(), 2u);
  for (const auto& child : children) {
    // What is in its way begins when its consumer starts: when the worker took its lease.
    auto taken = tlog_->wait_for({"lease " + child + " taken"}, 60s);
    ASSERT_TRUE(taken.has_value()) << tlog_->dump();
    expect_flagged(child, "waiting_for_parent", taken->at);
    auto line = tlog_->find({"shard " + child + " stalled (waiting_for_parent)"});
    ASSERT_TRUE(line);
    EXPECT_NE(line->text.find("waiting for parent " + parent +
                              " (held by worker w1, "
                              "checkpoint TRIM_HORIZON, not "
                              "SHARD_END)"),
              std::string::npos)
        << line->text;
    json stalled;
    ASSERT_TRUE(eventually(
        [&] { return !(stalled = stall_test::shard_stalled(w->http_url(), child)).is_null(); },
        10s));
    EXPECT_EQ(stalled["cause"], "waiting_for_parent");
  }
  gate->release();
  // The parent ends, its children start: their stalls end.
  for (const auto& child : children) {
    EXPECT_TRUE(tlog_->wait_for({"shard " + child + " no longer stalled (waiting_for_parent"}, 60s))
        << tlog_->dump();
  }
  EXPECT_TRUE(stop(*w).ok());
}

TEST_F(WorkerStallTest, ThrottledReadsAreFlaggedWithTheCountAndTheError) {
  create_stream(1);
  const std::string shard = shard_ids().front();
  put({"t0"});
  // GetRecords through the fault proxy, throttled while the control file exists.
  const std::string base = ::testing::TempDir() + "/" + kcl::testing::unique_name("throttle");
  const std::string control = base + ".on";
  std::ofstream(control) << "on";
  auto& emu = kcl::testing::shared_emulators();
  auto proxy =
      kcl::testing::start_node_server(KCL_SOURCE_DIR "/tests/integration/worker/throttle_proxy.js",
                                      {KCL_SOURCE_DIR "/tools/scenario/fault_proxy.js",
                                       emu.kinesis_url(), emu.dynamodb_url(), control},
                                      base + ".out");
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  WorkerConfig c = stall_config("w1");
  c.aws.kinesis_endpoint_url = proxy->url();
  auto w = start(c, std::make_shared<Script>());
  auto taken = tlog_->wait_for({"lease " + shard + " taken"}, 60s);
  ASSERT_TRUE(taken.has_value()) << tlog_->dump();
  expect_flagged(shard, "throttled", taken->at);
  auto line = tlog_->find({"shard " + shard + " stalled (throttled)"});
  ASSERT_TRUE(line);
  EXPECT_NE(line->text.find("GetRecords failed"), std::string::npos) << line->text;
  EXPECT_NE(line->text.find("ProvisionedThroughputExceeded"), std::string::npos) << line->text;
  EXPECT_FALSE(wait_delivered("t0", {}, 100ms)) << "nothing read while throttled";

  std::filesystem::remove(control);
  ASSERT_TRUE(wait_delivered("t0"));
  EXPECT_TRUE(tlog_->wait_for({"shard " + shard + " no longer stalled (throttled"}, 30s));
  EXPECT_TRUE(stop(*w).ok());
}

TEST_F(WorkerStallTest, RejectedCheckpointsAreFlaggedWithTheError) {
  create_stream(1);
  const std::string shard = shard_ids().front();
  put({"c0", "c1"});
  std::mutex mu;
  std::optional<stall_test::Time> first_rejection;
  auto script = std::make_shared<Script>();
  script->on_records = [&](const std::string&, std::span<const Record> records, Checkpointer& cp,
                           int) {
    // A sequence number past every record delivered: the checkpointer refuses it.
    const std::string past = std::string(records.back().sequence_number()) + "0";
    if (!cp.checkpoint(past, 0).ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (!first_rejection) first_rejection = std::chrono::steady_clock::now();
    }
  };
  auto w = start(stall_config("w1"), script);
  // (The delivery is logged before the processor's hook runs: wait for the rejection itself.)
  stall_test::Time began;
  ASSERT_TRUE(eventually(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        if (first_rejection) began = *first_rejection;
        return first_rejection.has_value();
      },
      30s));
  expect_flagged(shard, "checkpoint_rejected", began);
  auto line = tlog_->find({"shard " + shard + " stalled (checkpoint_rejected)"});
  ASSERT_TRUE(line);
  EXPECT_NE(line->text.find("rejected: "), std::string::npos) << line->text;
  EXPECT_TRUE(stop(*w).ok());
}

// A consumer that fails at its start every time (here: the lease's checkpoint is no sequence
// number of its shard, which GetShardIterator refuses) is restarted after a backoff each time and
// never says anything itself: the restart loop is flagged, with the count and the error, and
// /status.json shows it.
TEST_F(WorkerStallTest, AShardWhoseConsumerFailsAtEachRestartIsFlaggedWithTheError) {
  create_stream(1);
  const std::string shard = shard_ids().front();
  ASSERT_TRUE(store().create_table_if_not_exists().ok());
  // A sequence number, but none of this shard's.
  Lease planted;
  planted.lease_key = shard;
  planted.checkpoint = ExtendedSequenceNumber("12345678901234567890");
  ASSERT_TRUE(store().create_lease_if_not_exists(planted).ok());
  auto w = start(stall_config("w1"), std::make_shared<Script>());
  auto failed = tlog_->wait_for({"shard " + shard + ": the consumer stopped"}, 60s);
  ASSERT_TRUE(failed.has_value()) << tlog_->dump();
  expect_flagged(shard, "consumer_failing", failed->at);
  auto line = tlog_->find({"shard " + shard + " stalled (consumer_failing)"});
  ASSERT_TRUE(line);
  EXPECT_NE(line->text.find("GetShardIterator: InvalidArgumentException"), std::string::npos)
      << line->text;
  json stalled;
  ASSERT_TRUE(eventually(
      [&] { return !(stalled = stall_test::shard_stalled(w->http_url(), shard)).is_null(); }, 10s));
  EXPECT_EQ(stalled["cause"], "consumer_failing");
  EXPECT_TRUE(stop(*w).ok());
}

TEST_F(WorkerStallTest, ALeaseWhoseOwnerStoppedRenewingIsFlaggedByAWorkerThatCannotTakeIt) {
  create_stream(2);
  const auto ids = shard_ids();
  WorkerConfig c = stall_config("w1");
  c.leases.assignment = LeaseAssignment::kWorkerTakes;
  c.leases.max_leases_per_worker = 1;  // w1 cannot take a second lease
  auto w = start(c, std::make_shared<Script>());
  std::string mine;
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& id : ids) {
          if (tlog_->find({"lease " + id + " taken"})) mine = id;
        }
        return !mine.empty();
      },
      60s));
  const std::string other = ids[0] == mine ? ids[1] : ids[0];
  // A worker "ghost" takes the other lease and is never heard of again.
  auto seen = lease(other);
  ASSERT_TRUE(seen.has_value());
  ASSERT_FALSE(seen->lease_owner.has_value()) << "w1 holds at most one lease";
  auto taken = store().take_lease(*seen, "ghost");
  ASSERT_TRUE(taken.ok()) << taken.status();
  const auto ghost_took = std::chrono::steady_clock::now();

  expect_flagged(other, "no_live_owner", ghost_took);
  auto line = tlog_->find({"shard " + other + " stalled (no_live_owner)"});
  ASSERT_TRUE(line);
  EXPECT_NE(line->text.find("lease held by worker ghost, which stopped renewing it"),
            std::string::npos)
      << line->text;
  json stalled;
  ASSERT_TRUE(eventually(
      [&] { return !(stalled = stall_test::shard_stalled(w->http_url(), other)).is_null(); }, 10s));
  EXPECT_EQ(stalled["cause"], "no_live_owner");

  // A second worker with room takes it: no longer stalled.
  WorkerConfig c2 = stall_config("w2");
  c2.leases.assignment = LeaseAssignment::kWorkerTakes;
  auto w2 = start(c2, std::make_shared<Script>());
  EXPECT_TRUE(tlog_->wait_for({"shard " + other + " no longer stalled (no_live_owner"}, 60s))
      << tlog_->dump();
  EXPECT_TRUE(stop(*w2).ok());
  EXPECT_TRUE(stop(*w).ok());
}

}  // namespace
}  // namespace kcl::worker_test
