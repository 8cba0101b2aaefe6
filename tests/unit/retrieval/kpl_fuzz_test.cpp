// Randomised tests of the deaggregator: random valid aggregates must round-trip exactly, and
// mutated aggregates (most re-framed with a valid MD5, so the protobuf parser really sees the
// damage) must never crash, never drop and never deliver anything partial. Run under
// ASan/UBSan too (-DKCL_SANITIZE=ON).
#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "kpl/kpl_format.h"
#include "retrieval/kpl_deaggregator.h"
#include "support/kpl_builder.h"

namespace kcl::retrieval {
namespace {

namespace t = kcl::testing;
using Outcome = DeaggregationOutcome;

constexpr std::string_view kShard = "shardId-000000000001";

std::string random_bytes(std::mt19937_64& rng, std::size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::vector<t::SubRecord> random_sub_records(std::mt19937_64& rng) {
  std::vector<t::SubRecord> subs(rng() % 12);
  const std::size_t distinct_keys = 1 + rng() % 4;
  for (t::SubRecord& s : subs) {
    s.partition_key = "pk" + std::to_string(rng() % distinct_keys);
    if (rng() % 3 == 0) s.explicit_hash_key = std::to_string(rng());
    s.data = random_bytes(rng, 40);
    if (rng() % 4 == 0)
      s.tags.push_back({"tag", rng() % 2 ? std::optional<std::string>("v") : std::nullopt});
  }
  return subs;
}

std::string mutate(std::mt19937_64& rng, std::string s) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const std::size_t pos = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 6) {
      case 0:  // flip a bit
        if (!s.empty()) s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8)));
        break;
      case 1:  // set a byte to something interesting
        if (!s.empty()) {
          const unsigned char picks[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x0a, 0x12, 0x1a, 0x22};
          s[pos] = static_cast<char>(picks[rng() % sizeof picks]);
        }
        break;
      case 2:  // insert random bytes
        s.insert(pos, random_bytes(rng, 6));
        break;
      case 3:  // delete a run
        if (!s.empty()) s.erase(pos, 1 + rng() % 6);
        break;
      case 4:  // truncate
        s.resize(pos);
        break;
      default:  // insert a huge varint (a length or an index)
        s.insert(pos, t::varint(rng() | (std::uint64_t{1} << (rng() % 64))));
        break;
    }
  }
  return s;
}

// What must hold whatever the input.
void check_invariants(const kinesis::KinesisRecord& in, const DeaggregationResult& res,
                      const std::vector<kcl::Record>& out, std::size_t before) {
  ASSERT_EQ(out.size() - before, res.records_appended);
  switch (res.outcome) {
    case Outcome::kPlain:
      ASSERT_FALSE(kpl::has_magic(in.data));
      [[fallthrough]];
    case Outcome::kCorrupt:
      ASSERT_EQ(res.records_appended, 1u);
      ASSERT_EQ(out.back().data(), in.data);
      ASSERT_FALSE(out.back().aggregated());
      ASSERT_EQ(out.back().sub_sequence_number(), 0u);
      ASSERT_EQ(res.outcome == Outcome::kCorrupt, !res.reason.empty());
      break;
    case Outcome::kEmptyAggregate:
      ASSERT_EQ(res.records_appended, 0u);
      ASSERT_FALSE(res.reason.empty());
      break;
    case Outcome::kDeaggregated:
      ASSERT_GE(res.records_appended, 1u);
      for (std::size_t i = before; i < out.size(); ++i) {
        ASSERT_TRUE(out[i].aggregated());
        ASSERT_EQ(out[i].sub_sequence_number(), i - before);
        ASSERT_EQ(out[i].sequence_number(), in.sequence_number);
        ASSERT_EQ(out[i].shard_id(), kShard);
        // Everything delivered came out of the input bytes.
        ASSERT_LE(out[i].data().size(), in.data.size());
        ASSERT_LE(out[i].partition_key().size(), in.data.size());
      }
      break;
  }
}

TEST(KplFuzzTest, RandomValidAggregatesRoundTrip) {
  std::mt19937_64 rng(20240601);
  for (int iter = 0; iter < 3000; ++iter) {
    const auto subs = random_sub_records(rng);
    const kinesis::KinesisRecord in =
        t::kinesis_record(t::build_aggregate(subs, rng() % 2 == 0), std::to_string(rng()));
    std::vector<kcl::Record> out;
    const DeaggregationResult res = deaggregate(in, kShard, out);
    ASSERT_EQ(res.outcome, subs.empty() ? Outcome::kEmptyAggregate : Outcome::kDeaggregated)
        << res.reason;
    ASSERT_EQ(out.size(), subs.size());
    for (std::size_t i = 0; i < subs.size(); ++i) {
      ASSERT_EQ(out[i].partition_key(), subs[i].partition_key);
      ASSERT_EQ(out[i].explicit_hash_key(), subs[i].explicit_hash_key.value_or(""));
      ASSERT_EQ(out[i].data(), subs[i].data);
      ASSERT_EQ(out[i].sub_sequence_number(), i);
    }
  }
}

TEST(KplFuzzTest, MutatedAggregatesNeverCrashOrDrop) {
  std::mt19937_64 rng(987654321);
  std::size_t counts[4] = {};
  std::size_t parse_errors = 0, index_errors = 0, missing_fields = 0, md5_errors = 0;
  for (int iter = 0; iter < 30000; ++iter) {
    const auto subs = random_sub_records(rng);
    const std::string body = t::encode_protobuf(t::to_raw(subs, rng() % 2 == 0));
    std::string data;
    switch (rng() % 4) {
      case 0:  // damage anywhere, digest not recomputed: mostly MD5 mismatches
        data = mutate(rng, t::frame(body));
        break;
      case 1:  // random bytes behind the magic, valid digest
        data = t::frame(random_bytes(rng, 64));
        break;
      default:  // damaged protobuf behind a valid digest: exercises the parser
        data = t::frame(mutate(rng, body));
        break;
    }
    const kinesis::KinesisRecord in = t::kinesis_record(data, std::to_string(iter));
    std::vector<kcl::Record> out(rng() % 3);
    const std::size_t before = out.size();
    // Sometimes a small expansion budget, to walk that path too.
    DeaggregationLimits limits;
    if (rng() % 8 == 0) limits.max_expanded_bytes = 1 + rng() % 200;
    const DeaggregationResult res =
        rng() % 2 == 0 ? deaggregate(in, kShard, out, limits)
                       : deaggregate(kinesis::KinesisRecord(in), kShard, out, limits);
    check_invariants(in, res, out, before);
    if (HasFatalFailure()) {
      ADD_FAILURE() << "iteration " << iter << " input " << t::to_hex(data);
      return;
    }
    ++counts[static_cast<int>(res.outcome)];
    const auto has = [&](const char* what) { return res.reason.find(what) != std::string::npos; };
    parse_errors += has("protobuf parse error");
    index_errors += has("out of range");
    missing_fields += has("missing required field");
    md5_errors += has("MD5 mismatch");
  }
  // The mix really reached every outcome (the parser was exercised, not only the MD5 check).
  EXPECT_GT(counts[static_cast<int>(Outcome::kDeaggregated)], 1000u);
  EXPECT_GT(counts[static_cast<int>(Outcome::kCorrupt)], 1000u);
  EXPECT_GT(counts[static_cast<int>(Outcome::kEmptyAggregate)], 10u);
  EXPECT_GT(counts[static_cast<int>(Outcome::kPlain)], 10u);  // the magic itself was hit
  EXPECT_GT(parse_errors, 1000u);
  EXPECT_GT(index_errors, 10u);
  EXPECT_GT(missing_fields, 10u);
  EXPECT_GT(md5_errors, 1000u);
  std::cout << "outcomes: plain=" << counts[0] << " deaggregated=" << counts[1]
            << " empty=" << counts[2] << " corrupt=" << counts[3] << " (parse=" << parse_errors
            << " index=" << index_errors << " missing=" << missing_fields << " md5=" << md5_errors
            << ")\n";
}

}  // namespace
}  // namespace kcl::retrieval
