#include "retrieval/kpl_deaggregator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/kpl_builder.h"

namespace kcl::retrieval {
namespace {

namespace t = kcl::testing;
using Outcome = DeaggregationOutcome;

constexpr std::string_view kShard = "shardId-000000000007";
const std::string kSeq = "49590338271490256608559692538361571095921575989136588898";

std::vector<t::SubRecord> make_sub_records(std::size_t n, bool with_ehk) {
  std::vector<t::SubRecord> v;
  for (std::size_t i = 0; i < n; ++i) {
    t::SubRecord s;
    s.partition_key = "pk-" + std::to_string(i);
    if (with_ehk && i % 2 == 0) s.explicit_hash_key = std::to_string(1000000007ull * (i + 1));
    s.data = "payload #" + std::to_string(i) + std::string(i % 7, '\0') + "\xff";
    v.push_back(std::move(s));
  }
  return v;
}

void expect_matches(const std::vector<kcl::Record>& out, std::size_t first,
                    const std::vector<t::SubRecord>& subs, const kinesis::KinesisRecord& in) {
  ASSERT_EQ(out.size() - first, subs.size());
  for (std::size_t i = 0; i < subs.size(); ++i) {
    const kcl::Record& r = out[first + i];
    SCOPED_TRACE("sub-record " + std::to_string(i));
    EXPECT_EQ(r.shard_id(), kShard);
    EXPECT_EQ(r.sequence_number(), in.sequence_number);
    EXPECT_EQ(r.sub_sequence_number(), i);
    EXPECT_TRUE(r.aggregated());
    EXPECT_EQ(r.partition_key(), subs[i].partition_key);
    EXPECT_EQ(r.explicit_hash_key(), subs[i].explicit_hash_key.value_or(""));
    EXPECT_EQ(r.approximate_arrival_timestamp(), in.approximate_arrival_timestamp);
    EXPECT_EQ(r.data(), subs[i].data);
  }
}

// Expects `in` delivered as it came, reported corrupt with `cause` in the reason.
void expect_delivered_as_it_came(const kinesis::KinesisRecord& in, std::string_view cause) {
  std::vector<kcl::Record> out;
  const DeaggregationResult res = deaggregate(in, kShard, out);
  EXPECT_EQ(res.outcome, Outcome::kCorrupt) << res.reason;
  EXPECT_TRUE(res.corrupt());
  EXPECT_EQ(res.records_appended, 1u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data(), in.data);
  EXPECT_FALSE(out[0].aggregated());
  EXPECT_EQ(out[0].sub_sequence_number(), 0u);
  EXPECT_EQ(out[0].sequence_number(), in.sequence_number);
  EXPECT_EQ(out[0].partition_key(), in.partition_key);
  EXPECT_EQ(out[0].shard_id(), kShard);
  EXPECT_NE(res.reason.find("KPL aggregate in shard " + std::string(kShard) + " seq " +
                            std::string(in.sequence_number)),
            std::string::npos)
      << res.reason;
  EXPECT_NE(res.reason.find(cause), std::string::npos) << res.reason;
}

TEST(KplDeaggregatorTest, PlainRecordPassesThrough) {
  for (std::string data : {std::string(""), std::string("x"), std::string("\xF3\x89\x9A", 3),
                           std::string("hello world"), std::string(100, '\0')}) {
    kinesis::KinesisRecord in = t::kinesis_record(data);
    in.explicit_hash_key = "12345";
    std::vector<kcl::Record> out;
    const DeaggregationResult res = deaggregate(in, kShard, out);
    EXPECT_EQ(res.outcome, Outcome::kPlain);
    EXPECT_TRUE(res.reason.empty());
    EXPECT_EQ(res.records_appended, 1u);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shard_id(), kShard);
    EXPECT_EQ(out[0].sequence_number(), in.sequence_number);
    EXPECT_EQ(out[0].sub_sequence_number(), 0u);
    EXPECT_FALSE(out[0].aggregated());
    EXPECT_EQ(out[0].partition_key(), "outer-pk");
    EXPECT_EQ(out[0].explicit_hash_key(), "12345");
    EXPECT_EQ(out[0].approximate_arrival_timestamp(), in.approximate_arrival_timestamp);
    EXPECT_EQ(out[0].data(), data);
  }
}

TEST(KplDeaggregatorTest, ZeroCopyOverloadPointsIntoTheOwnersBytes) {
  const std::string big(4096, 'z');
  kinesis::KinesisRecord in = t::kinesis_record(big);
  auto owner = std::make_shared<int>(0);  // stands for the buffer `in` points into
  std::vector<kcl::Record> out;
  const DeaggregationResult res = deaggregate(in, kShard, owner, out);
  EXPECT_EQ(res.outcome, Outcome::kPlain);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data(), big);
  EXPECT_EQ(out[0].data().data(), in.data.data());  // a view, not a copy
  EXPECT_EQ(out[0].sequence_number(), kSeq);
  EXPECT_EQ(owner.use_count(), 2) << "the record holds the owner";
  out.clear();
  EXPECT_EQ(owner.use_count(), 1);
}

TEST(KplDeaggregatorTest, ZeroCopySubRecordsAndCorruptOnesPointIntoTheAggregate) {
  const std::string agg = t::with_bad_md5(t::build_aggregate(make_sub_records(30, true)));
  kinesis::KinesisRecord in = t::kinesis_record(agg);
  auto owner = std::make_shared<int>(0);
  std::vector<kcl::Record> out;
  EXPECT_EQ(deaggregate(in, kShard, owner, out).outcome, Outcome::kCorrupt);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data().data(), in.data.data());
  EXPECT_EQ(out[0].data(), agg);

  const auto subs = make_sub_records(5, true);
  const kinesis::KinesisRecord good = t::kinesis_record(t::build_aggregate(subs));
  std::vector<kcl::Record> by_copy, by_view;
  EXPECT_EQ(deaggregate(good, kShard, by_copy).outcome, Outcome::kDeaggregated);
  EXPECT_EQ(deaggregate(good, kShard, owner, by_view).outcome, Outcome::kDeaggregated);
  expect_matches(by_copy, 0, subs, good);
  expect_matches(by_view, 0, subs, good);
  const std::string_view bytes = good.data;
  for (const kcl::Record& r : by_view) {
    EXPECT_GE(r.data().data(), bytes.data());
    EXPECT_LE(r.data().data() + r.data().size(), bytes.data() + bytes.size());
  }
  for (const kcl::Record& r : by_copy) {
    EXPECT_TRUE(r.data().data() < bytes.data() || r.data().data() >= bytes.data() + bytes.size())
        << "the copying overload keeps copies of its own";
  }
}

TEST(KplDeaggregatorTest, CopiedRecordsOutliveTheirInput) {
  const auto subs = make_sub_records(4, true);
  std::vector<kcl::Record> out;
  {
    std::string bytes = t::build_aggregate(subs);
    kinesis::KinesisRecord in;
    in.data = bytes;
    in.sequence_number = kSeq;
    EXPECT_EQ(deaggregate(in, kShard, out).outcome, Outcome::kDeaggregated);
    bytes.assign(bytes.size(), '\0');  // the input changes and goes away
  }
  ASSERT_EQ(out.size(), subs.size());
  for (std::size_t i = 0; i < subs.size(); ++i) EXPECT_EQ(out[i].data(), subs[i].data);
}

// Bytes written by hand from the format description (and the MD5 by a third tool), so the
// test does not rest on the builder alone.
TEST(KplDeaggregatorTest, GoldenVectorWrittenByHand) {
  const std::string body = t::from_hex(
      "0a 01 61"                    // partition_key_table: "a"
      "0a 02 62 62"                 // partition_key_table: "bb"
      "12 05 31 32 33 34 35"        // explicit_hash_key_table: "12345"
      "1a 06  08 00  1a 02 68 69"   // record {pk 0, data "hi"}
      "1a 0e  08 01  10 00  1a 00"  // record {pk 1, ehk 0, data "",
      "   22 06 0a 01 74 12 01 76"  //         tag {key "t", value "v"}}
  );
  ASSERT_EQ(body.size(), 38u);
  EXPECT_EQ(t::to_hex(t::md5(body)), "9ca90436f3fee900312b7f3a22c6a6f7");
  const std::string data =
      t::from_hex("f3899ac2") + body + t::from_hex("9ca90436f3fee900312b7f3a22c6a6f7");
  EXPECT_EQ(data, t::frame(body));

  const kinesis::KinesisRecord in = t::kinesis_record(data);
  std::vector<kcl::Record> out;
  const DeaggregationResult res = deaggregate(in, kShard, out);
  ASSERT_EQ(res.outcome, Outcome::kDeaggregated) << res.reason;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].partition_key(), "a");
  EXPECT_EQ(out[0].explicit_hash_key(), "");
  EXPECT_EQ(out[0].data(), "hi");
  EXPECT_EQ(out[0].sub_sequence_number(), 0u);
  EXPECT_EQ(out[1].partition_key(), "bb");
  EXPECT_EQ(out[1].explicit_hash_key(), "12345");
  EXPECT_EQ(out[1].data(), "");
  EXPECT_EQ(out[1].sub_sequence_number(), 1u);

  // The builder encodes the same aggregate to the same bytes.
  t::SubRecord a{"a", std::nullopt, "hi", {}};
  t::SubRecord b{"bb", "12345", "", {t::KplTag{"t", "v"}}};
  EXPECT_EQ(t::to_hex(t::build_aggregate({a, b})), t::to_hex(data));
}

class KplAggregateSizeTest : public ::testing::TestWithParam<std::size_t> {};

TEST_P(KplAggregateSizeTest, DeliversEverySubRecordInOrder) {
  const auto subs = make_sub_records(GetParam(), /*with_ehk=*/true);
  for (bool share : {true, false}) {
    const kinesis::KinesisRecord in = t::kinesis_record(t::build_aggregate(subs, share));
    std::vector<kcl::Record> out;
    const DeaggregationResult res = deaggregate(in, kShard, out);
    EXPECT_EQ(res.outcome, Outcome::kDeaggregated) << res.reason;
    EXPECT_TRUE(res.reason.empty());
    EXPECT_EQ(res.records_appended, subs.size());
    expect_matches(out, 0, subs, in);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, KplAggregateSizeTest, ::testing::Values(1, 3, 500));

TEST(KplDeaggregatorTest, SharedPartitionKeyTableEntries) {
  std::vector<t::SubRecord> subs;
  for (int i = 0; i < 12; ++i) {
    subs.push_back({"key-" + std::to_string(i % 3),
                    i % 4 == 0 ? std::optional<std::string>("42") : std::nullopt,
                    "d" + std::to_string(i),
                    {}});
  }
  const t::RawAggregate raw = t::to_raw(subs, /*share_keys=*/true);
  ASSERT_EQ(raw.partition_key_table.size(), 3u);
  ASSERT_EQ(raw.explicit_hash_key_table.size(), 1u);
  const kinesis::KinesisRecord in = t::kinesis_record(t::frame(t::encode_protobuf(raw)));
  std::vector<kcl::Record> out;
  ASSERT_EQ(deaggregate(in, kShard, out).outcome, Outcome::kDeaggregated);
  expect_matches(out, 0, subs, in);
}

TEST(KplDeaggregatorTest, TagsAreIgnored) {
  auto subs = make_sub_records(3, false);
  subs[0].tags = {{"k1", "v1"}, {"k2", std::nullopt}};
  subs[2].tags = {{"", ""}};
  const kinesis::KinesisRecord in = t::kinesis_record(t::build_aggregate(subs));
  std::vector<kcl::Record> out;
  ASSERT_EQ(deaggregate(in, kShard, out).outcome, Outcome::kDeaggregated);
  expect_matches(out, 0, subs, in);
}

TEST(KplDeaggregatorTest, MalformedTagIsAParseError) {
  t::RawAggregate raw = t::to_raw(make_sub_records(2, false));
  // A Tag without its required key.
  raw.records[1].extra_fields = t::bytes_field(4, t::bytes_field(2, "value only"));
  expect_delivered_as_it_came(t::kinesis_record(t::frame(t::encode_protobuf(raw))),
                              "record 1: Tag missing required field key");
  // A Tag whose bytes are not a message.
  raw.records[1].extra_fields = t::bytes_field(4, t::from_hex("0a05"));
  expect_delivered_as_it_came(t::kinesis_record(t::frame(t::encode_protobuf(raw))),
                              "protobuf parse error in Tag");
}

TEST(KplDeaggregatorTest, Md5MismatchIsDeliveredAsItCame) {
  const std::string good = t::build_aggregate(make_sub_records(3, true));
  expect_delivered_as_it_came(t::kinesis_record(t::with_bad_md5(good)), "MD5 mismatch");
  // A changed body byte, digest untouched.
  std::string changed = good;
  changed[10] = static_cast<char>(changed[10] ^ 1);
  expect_delivered_as_it_came(t::kinesis_record(changed), "MD5 mismatch");
  // Cut short: the last 16 bytes are no longer the digest.
  expect_delivered_as_it_came(t::kinesis_record(good.substr(0, good.size() - 3)), "MD5 mismatch");
}

TEST(KplDeaggregatorTest, TruncatedProtobufWithValidMd5) {
  const std::string body = t::encode_protobuf(t::to_raw(make_sub_records(3, true)));
  int corrupt = 0;
  for (std::size_t keep = 1; keep < body.size(); ++keep) {
    const kinesis::KinesisRecord in = t::kinesis_record(t::with_truncated_body(body, keep));
    std::vector<kcl::Record> out;
    const DeaggregationResult res = deaggregate(in, kShard, out);
    // A cut may land on a field boundary and leave a valid, shorter aggregate: then some
    // sub-records come out. Otherwise the record is delivered as it came.
    if (res.outcome == Outcome::kCorrupt) {
      ++corrupt;
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].data(), in.data);
      EXPECT_NE(res.reason.find("protobuf parse error"), std::string::npos) << res.reason;
    } else {
      EXPECT_TRUE(res.outcome == Outcome::kDeaggregated || res.outcome == Outcome::kEmptyAggregate)
          << keep;
      EXPECT_LT(out.size(), 3u);
    }
  }
  EXPECT_GT(corrupt, static_cast<int>(body.size()) / 2);
}

TEST(KplDeaggregatorTest, IndexOutOfRange) {
  {
    t::RawAggregate raw = t::to_raw(make_sub_records(3, true));
    raw.records[2].partition_key_index = raw.partition_key_table.size();
    expect_delivered_as_it_came(t::kinesis_record(t::frame(t::encode_protobuf(raw))),
                                "record 2: partition_key_index 3 out of range (table has 3)");
  }
  {
    t::RawAggregate raw = t::to_raw(make_sub_records(3, true));
    raw.records[1].explicit_hash_key_index = 7;
    expect_delivered_as_it_came(t::kinesis_record(t::frame(t::encode_protobuf(raw))),
                                "record 1: explicit_hash_key_index 7 out of range");
  }
  {  // an index far past anything: 2^64-1
    t::RawAggregate raw = t::to_raw(make_sub_records(1, false));
    raw.records[0].partition_key_index = ~std::uint64_t{0};
    expect_delivered_as_it_came(t::kinesis_record(t::frame(t::encode_protobuf(raw))),
                                "out of range");
  }
  {  // no tables at all
    t::RawAggregate raw;
    raw.records.push_back({0, std::nullopt, "x", {}, {}});
    expect_delivered_as_it_came(t::kinesis_record(t::frame(t::encode_protobuf(raw))),
                                "partition_key_index 0 out of range (table has 0)");
  }
}

TEST(KplDeaggregatorTest, NothingPartialIsAppendedOnCorruption) {
  t::RawAggregate raw = t::to_raw(make_sub_records(50, true));
  raw.records.back().partition_key_index = 999;
  std::vector<kcl::Record> out(2);  // records already there stay, nothing partial is added
  const DeaggregationResult res =
      deaggregate(t::kinesis_record(t::frame(t::encode_protobuf(raw))), kShard, out);
  EXPECT_EQ(res.outcome, Outcome::kCorrupt);
  EXPECT_EQ(out.size(), 3u);
  EXPECT_FALSE(out.back().aggregated());
}

TEST(KplDeaggregatorTest, MissingRequiredFields) {
  {
    t::RawAggregate raw = t::to_raw(make_sub_records(2, false));
    raw.records[1].partition_key_index.reset();
    expect_delivered_as_it_came(t::kinesis_record(t::frame(t::encode_protobuf(raw))),
                                "record 1: missing required field partition_key_index");
  }
  {
    t::RawAggregate raw = t::to_raw(make_sub_records(2, false));
    raw.records[0].data.reset();
    expect_delivered_as_it_came(t::kinesis_record(t::frame(t::encode_protobuf(raw))),
                                "record 0: missing required field data");
  }
  {  // a required field sent with the wrong wire type is an unknown field, so still missing
    t::RawAggregate raw = t::to_raw(make_sub_records(1, false));
    raw.records[0].data.reset();
    raw.records[0].extra_fields = t::varint_field(3, 5);
    expect_delivered_as_it_came(t::kinesis_record(t::frame(t::encode_protobuf(raw))),
                                "missing required field data");
  }
}

TEST(KplDeaggregatorTest, MagicOnlyAndTooShort) {
  const std::string magic = t::kpl_magic();
  expect_delivered_as_it_came(t::kinesis_record(magic), "shorter than magic + 16-byte MD5");
  expect_delivered_as_it_came(t::kinesis_record(magic + std::string(15, 'a')),
                              "shorter than magic + 16-byte MD5 (19 bytes)");
  // magic + 16 bytes that are not MD5(""): a mismatch.
  expect_delivered_as_it_came(t::kinesis_record(magic + std::string(16, 'a')), "MD5 mismatch");
}

// Decision: a valid aggregate with zero sub-records delivers nothing and is reported as
// kEmptyAggregate with a reason, so the caller can count or log it. (The Java KCL delivers
// one with tables as nothing too, but the 20 bytes of magic + MD5("") as a plain record: it
// wants more bytes than the digest after the magic. An empty aggregate is what a KPL writes
// for no records, so kcl-cpp reads both as empty aggregates.)
TEST(KplDeaggregatorTest, EmptyAggregateDeliversNothingButIsReported) {
  {  // zero-length protobuf: magic + MD5("")
    const std::string data = t::kpl_magic() + t::from_hex("d41d8cd98f00b204e9800998ecf8427e");
    EXPECT_EQ(data, t::frame(""));
    std::vector<kcl::Record> out;
    const DeaggregationResult res = deaggregate(t::kinesis_record(data), kShard, out);
    EXPECT_EQ(res.outcome, Outcome::kEmptyAggregate);
    EXPECT_EQ(res.records_appended, 0u);
    EXPECT_TRUE(out.empty());
    EXPECT_NE(res.reason.find("no sub-records"), std::string::npos) << res.reason;
    EXPECT_NE(res.reason.find(kSeq), std::string::npos) << res.reason;
    EXPECT_FALSE(res.corrupt());
  }
  {  // tables but no records
    t::RawAggregate raw;
    raw.partition_key_table = {"a", "b"};
    raw.explicit_hash_key_table = {"1"};
    std::vector<kcl::Record> out;
    const DeaggregationResult res =
        deaggregate(t::kinesis_record(t::frame(t::encode_protobuf(raw))), kShard, out);
    EXPECT_EQ(res.outcome, Outcome::kEmptyAggregate);
    EXPECT_TRUE(out.empty());
  }
}

TEST(KplDeaggregatorTest, UnknownFieldsAreSkippedByWireType) {
  const auto subs = make_sub_records(4, true);
  t::RawAggregate raw = t::to_raw(subs);
  const std::string unknown = t::varint_field(9, 123456789) + t::fixed64_field(10, 7) +
                              t::bytes_field(11, "future") + t::fixed32_field(12, 9) +
                              t::varint_field(536870911, 1);
  raw.extra_fields = unknown;
  raw.records[0].extra_fields = unknown;
  // Known field numbers with an unexpected wire type are unknown fields too.
  raw.records[1].extra_fields =
      t::fixed64_field(1, 99) + t::bytes_field(2, "x") + t::fixed32_field(3, 1);
  raw.extra_fields += t::varint_field(1, 5) + t::fixed32_field(3, 5);
  const kinesis::KinesisRecord in = t::kinesis_record(t::frame(t::encode_protobuf(raw)));
  std::vector<kcl::Record> out;
  const DeaggregationResult res = deaggregate(in, kShard, out);
  ASSERT_EQ(res.outcome, Outcome::kDeaggregated) << res.reason;
  expect_matches(out, 0, subs, in);
}

TEST(KplDeaggregatorTest, FieldsMayComeInAnyOrderAndTheLastScalarWins) {
  t::RawAggregate raw;
  raw.partition_key_table = {"first", "second"};
  // Record fields reversed, pk index given twice (last wins), tables after the records.
  const std::string record =
      t::bytes_field(3, "data") + t::varint_field(1, 0) + t::varint_field(1, 1);
  const std::string body =
      t::bytes_field(3, record) + t::bytes_field(1, "first") + t::bytes_field(1, "second");
  std::vector<kcl::Record> out;
  ASSERT_EQ(deaggregate(t::kinesis_record(t::frame(body)), kShard, out).outcome,
            Outcome::kDeaggregated);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].partition_key(), "second");
  EXPECT_EQ(out[0].data(), "data");
}

TEST(KplDeaggregatorTest, GroupsAndBadWireDataAreParseErrors) {
  const std::string good = t::encode_protobuf(t::to_raw(make_sub_records(2, false)));
  expect_delivered_as_it_came(t::kinesis_record(t::frame(good + t::key(15, 3) + t::key(15, 4))),
                              "groups");
  expect_delivered_as_it_came(t::kinesis_record(t::frame(good + t::key(15, 4))), "groups");
  expect_delivered_as_it_came(t::kinesis_record(t::frame(good + t::from_hex("80"))),
                              "truncated varint");
  expect_delivered_as_it_came(t::kinesis_record(t::frame(good + t::from_hex("0f"))),
                              "invalid wire type");
  // A length-delimited field claiming 2^63 bytes.
  expect_delivered_as_it_came(
      t::kinesis_record(t::frame(good + t::key(3, 2) + t::varint(std::uint64_t{1} << 63) + "x")),
      "longer than the bytes left");
  // Inside a Record: data claiming more than the record holds.
  const std::string bad_record = t::varint_field(1, 0) + t::key(3, 2) + t::varint(100) + "abc";
  expect_delivered_as_it_came(
      t::kinesis_record(t::frame(t::bytes_field(1, "k") + t::bytes_field(3, bad_record))),
      "record 0: protobuf parse error in Record");
}

TEST(KplDeaggregatorTest, ExpansionLimitGuardsAgainstAmplification) {
  // One 64 KiB partition key shared by 2,000 sub-records of a few bytes each: ~12 KB of
  // protobuf would expand to 128 MB of keys.
  t::RawAggregate raw;
  raw.partition_key_table = {std::string(64 * 1024, 'k')};
  for (int i = 0; i < 2000; ++i) raw.records.push_back({0, std::nullopt, "", {}, {}});
  const kinesis::KinesisRecord in = t::kinesis_record(t::frame(t::encode_protobuf(raw)));
  ASSERT_LT(in.data.size(), 80u * 1024);
  expect_delivered_as_it_came(in, "expands to more than 67108864 bytes");

  // The limit is inclusive: exactly at it deaggregates, one byte under it does not.
  const auto subs = make_sub_records(3, true);
  std::size_t total = 0;
  for (const auto& sub : subs) {
    total += sub.partition_key.size() + sub.explicit_hash_key.value_or("").size() + sub.data.size();
  }
  const kinesis::KinesisRecord small = t::kinesis_record(t::build_aggregate(subs));
  DeaggregationLimits limits;
  limits.max_expanded_bytes = total;
  std::vector<kcl::Record> out;
  EXPECT_EQ(deaggregate(small, kShard, out, limits).outcome, Outcome::kDeaggregated);
  EXPECT_EQ(out.size(), 3u);
  limits.max_expanded_bytes = total - 1;
  out.clear();
  EXPECT_EQ(deaggregate(small, kShard, out, limits).outcome, Outcome::kCorrupt);
  EXPECT_EQ(out.size(), 1u);
}

TEST(KplDeaggregatorTest, AppendsAfterWhatIsAlreadyThere) {
  const auto subs = make_sub_records(3, true);
  const kinesis::KinesisRecord in = t::kinesis_record(t::build_aggregate(subs));
  std::vector<kcl::Record> out(4);
  ASSERT_EQ(deaggregate(in, kShard, out).records_appended, 3u);
  expect_matches(out, 4, subs, in);
}

TEST(KplDeaggregatorTest, DeaggregateAllCountsEachKind) {
  const auto subs = make_sub_records(5, true);
  std::vector<kinesis::KinesisRecord> batch;
  batch.push_back(t::kinesis_record("plain-1", "100"));
  batch.push_back(t::kinesis_record(t::build_aggregate(subs), "200"));
  batch.push_back(t::kinesis_record(t::with_bad_md5(t::build_aggregate(subs)), "300"));
  batch.push_back(t::kinesis_record(t::frame(""), "400"));
  batch.push_back(t::kinesis_record("plain-2", "500"));
  std::vector<kcl::Record> out;
  const DeaggregationStats stats = deaggregate_all(std::move(batch), kShard, out);
  EXPECT_EQ(stats.plain, 2u);
  EXPECT_EQ(stats.aggregates, 2u);
  EXPECT_EQ(stats.sub_records, 5u);
  EXPECT_EQ(stats.empty_aggregates, 1u);
  EXPECT_EQ(stats.corrupt, 1u);
  ASSERT_EQ(stats.reasons.size(), 2u);
  EXPECT_NE(stats.reasons[0].find("seq 300: MD5 mismatch"), std::string::npos);
  EXPECT_NE(stats.reasons[1].find("seq 400"), std::string::npos);
  ASSERT_EQ(out.size(), 1u + 5u + 1u + 1u);
  EXPECT_EQ(out[0].data(), "plain-1");
  EXPECT_EQ(out[1].sequence_number(), "200");
  EXPECT_EQ(out[5].sub_sequence_number(), 4u);
  EXPECT_EQ(out[6].sequence_number(), "300");
  EXPECT_FALSE(out[6].aggregated());
  EXPECT_EQ(out[7].data(), "plain-2");
}

TEST(KplDeaggregatorTest, OutcomeNames) {
  EXPECT_EQ(to_string(Outcome::kPlain), "plain");
  EXPECT_EQ(to_string(Outcome::kDeaggregated), "deaggregated");
  EXPECT_EQ(to_string(Outcome::kEmptyAggregate), "empty_aggregate");
  EXPECT_EQ(to_string(Outcome::kCorrupt), "corrupt");
}

// ---- drop_aggregates_outside: the Java KCL's rule ----

kcl::Record sub_record(const std::string& seq, std::uint64_t sub, const std::string& pk,
                       const std::string& ehk = "") {
  kcl::Record::Fields f;
  f.shard_id = std::string(kShard);
  f.sequence_number = seq;
  f.sub_sequence_number = sub;
  f.aggregated = true;
  f.partition_key = pk;
  f.explicit_hash_key = ehk;
  f.data = seq + "/" + std::to_string(sub);
  return kcl::Record(std::move(f));
}

kcl::Record plain_record(const std::string& seq, const std::string& ehk) {
  kcl::Record r = sub_record(seq, 0, "plain", ehk);
  r.set_aggregated(false);
  return r;
}

std::vector<std::string> data_of(const std::vector<kcl::Record>& records) {
  std::vector<std::string> out;
  for (const auto& r : records) out.emplace_back(r.data());
  return out;
}

TEST(KplDeaggregatorTest, AnAggregateHoldingARecordOutsideTheShardIsDroppedWhole) {
  // The lower half of the hash key space.
  const auto range = parse_shard_hash_range("0", "170141183460469231731687303715884105727");
  ASSERT_TRUE(range.has_value());
  const std::string low = "5", high = "170141183460469231731687303715884105728";
  std::vector<kcl::Record> records = {
      plain_record("10", high),  // a plain record is where Kinesis put it: kept
      sub_record("11", 0, "a", low),  sub_record("11", 1, "b", low),   // inside: kept
      sub_record("12", 0, "c", low),  sub_record("12", 1, "d", high),  // one outside: dropped
      sub_record("12", 2, "e", low),  sub_record("13", 0, "f", "not-a-number"),  // no ground: kept
      sub_record("14", 0, "g", high),                                            // outside: dropped
      sub_record("15", 0, "h", low)};
  std::string first;
  EXPECT_EQ(drop_aggregates_outside(records, *range, &first), 2u);
  EXPECT_EQ(first, "12");
  EXPECT_EQ(data_of(records), (std::vector<std::string>{"10/0", "11/0", "11/1", "13/0", "15/0"}));
}

TEST(KplDeaggregatorTest, ARecordWithoutAnExplicitHashKeyIsJudgedByItsPartitionKeysMd5) {
  // MD5("pk-0") and MD5("pk-1") fall on either side of the middle of the space (checked).
  const kpl::HashKey half = kpl::HashKey{1} << 127;
  const bool first_low = kpl::partition_key_hash("pk-0") < half;
  std::string other;
  for (int i = 1;; ++i) {
    other = "pk-" + std::to_string(i);
    if ((kpl::partition_key_hash(other) < half) != first_low) break;
  }
  const ShardHashRange low{0, half - 1}, high{half, ~kpl::HashKey{0}};
  std::vector<kcl::Record> records = {sub_record("20", 0, "pk-0")};
  EXPECT_EQ(drop_aggregates_outside(records, first_low ? low : high), 0u);
  EXPECT_EQ(records.size(), 1u);
  records.push_back(sub_record("20", 1, other));
  EXPECT_EQ(drop_aggregates_outside(records, first_low ? low : high), 1u);
  EXPECT_TRUE(records.empty());
}

TEST(KplDeaggregatorTest, AShardRangeParsesFromTheLeasesDecimals) {
  EXPECT_FALSE(parse_shard_hash_range("", "5").has_value());
  EXPECT_FALSE(parse_shard_hash_range("7", "5").has_value());
  EXPECT_FALSE(parse_shard_hash_range("0", "340282366920938463463374607431768211456").has_value());
  const auto whole = parse_shard_hash_range("0", "340282366920938463463374607431768211455");
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->end, ~kpl::HashKey{0});
}

}  // namespace
}  // namespace kcl::retrieval
