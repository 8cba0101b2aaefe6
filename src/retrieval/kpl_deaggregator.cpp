#include "retrieval/kpl_deaggregator.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "kpl/kpl_format.h"
#include "kpl/protobuf_wire.h"

namespace kcl::retrieval {
namespace {

using kpl::pb::WireReader;
using kpl::pb::WireType;
namespace agg_field = kpl::aggregated_record;
namespace rec_field = kpl::record;

// One sub-record as parsed: views into the caller's data, indices not yet checked.
struct SubView {
  std::uint64_t pk_index = 0;
  std::uint64_t ehk_index = 0;
  bool has_ehk = false;
  std::string_view data;
};

struct ParsedAggregate {
  std::vector<std::string_view> pk_table;
  std::vector<std::string_view> ehk_table;
  std::vector<SubView> records;
};

// Parse failures: a message with context, built only on the failure path.
std::string wire_error(const WireReader& r, std::string_view where, std::size_t base) {
  std::string s = "protobuf parse error in ";
  s += where;
  s += " at byte ";
  s += std::to_string(base + r.position());
  s += ": ";
  s += r.error() != nullptr ? r.error() : "unknown";
  return s;
}

// Tag { 1: required string key, 2: optional string value }: checked, then ignored.
bool parse_tag(std::string_view bytes, std::size_t base, std::string& error) {
  WireReader r(bytes);
  bool has_key = false;
  while (!r.at_end()) {
    std::uint32_t field = 0;
    WireType type{};
    bool ok = r.read_key(field, type);
    if (ok && (field == kpl::tag::kKey || field == kpl::tag::kValue) &&
        type == WireType::kLengthDelimited) {
      std::string_view ignored;
      ok = r.read_length_delimited(ignored);
      if (field == kpl::tag::kKey) has_key = true;
    } else if (ok) {
      ok = r.skip(type);
    }
    if (!ok) {
      error = wire_error(r, "Tag", base);
      return false;
    }
  }
  if (!has_key) {
    error = "Tag missing required field key";
    return false;
  }
  return true;
}

bool parse_record(std::string_view bytes, std::size_t base, std::size_t index, SubView& out,
                  std::string& error) {
  WireReader r(bytes);
  bool has_pk = false;
  bool has_data = false;
  auto fail = [&](std::string_view what) {
    error = "record " + std::to_string(index) + ": " + std::string(what);
    return false;
  };
  while (!r.at_end()) {
    std::uint32_t field = 0;
    WireType type{};
    if (!r.read_key(field, type)) return fail(wire_error(r, "Record", base));
    if (field == rec_field::kPartitionKeyIndex && type == WireType::kVarint) {
      if (!r.read_varint(out.pk_index)) return fail(wire_error(r, "Record", base));
      has_pk = true;
    } else if (field == rec_field::kExplicitHashKeyIndex && type == WireType::kVarint) {
      if (!r.read_varint(out.ehk_index)) return fail(wire_error(r, "Record", base));
      out.has_ehk = true;
    } else if (field == rec_field::kData && type == WireType::kLengthDelimited) {
      if (!r.read_length_delimited(out.data)) return fail(wire_error(r, "Record", base));
      has_data = true;
    } else if (field == rec_field::kTags && type == WireType::kLengthDelimited) {
      const std::size_t tag_base = base + r.position();
      std::string_view tag;
      if (!r.read_length_delimited(tag)) return fail(wire_error(r, "Record", base));
      std::string tag_error;
      if (!parse_tag(tag, tag_base, tag_error)) return fail(tag_error);
    } else if (!r.skip(type)) {  // unknown field (or known number, other wire type)
      return fail(wire_error(r, "Record", base));
    }
  }
  if (!has_pk) return fail("missing required field partition_key_index");
  if (!has_data) return fail("missing required field data");
  return true;
}

bool parse_aggregate(std::string_view body, ParsedAggregate& out, std::string& error) {
  WireReader r(body);
  auto fail = [&] {
    error = wire_error(r, "AggregatedRecord", 0);
    return false;
  };
  while (!r.at_end()) {
    std::uint32_t field = 0;
    WireType type{};
    if (!r.read_key(field, type)) return fail();
    if (type == WireType::kLengthDelimited &&
        (field == agg_field::kPartitionKeyTable || field == agg_field::kExplicitHashKeyTable ||
         field == agg_field::kRecords)) {
      std::string_view value;
      if (!r.read_length_delimited(value)) return fail();
      if (field == agg_field::kPartitionKeyTable) {
        out.pk_table.push_back(value);
      } else if (field == agg_field::kExplicitHashKeyTable) {
        out.ehk_table.push_back(value);
      } else {
        // Offset of the Record's first byte inside the protobuf body, for messages.
        const std::size_t base = r.position() - value.size();
        SubView sub;
        if (!parse_record(value, base, out.records.size(), sub, error)) return false;
        out.records.push_back(sub);
      }
    } else if (!r.skip(type)) {
      return fail();
    }
  }
  return true;
}

// Checks indices and the expansion budget.
bool validate(const ParsedAggregate& agg, const DeaggregationLimits& limits, std::string& error) {
  std::size_t total = 0;
  const std::size_t limit = limits.max_expanded_bytes;
  for (std::size_t i = 0; i < agg.records.size(); ++i) {
    const SubView& s = agg.records[i];
    if (s.pk_index >= agg.pk_table.size()) {
      error = "record " + std::to_string(i) + ": partition_key_index " +
              std::to_string(s.pk_index) + " out of range (table has " +
              std::to_string(agg.pk_table.size()) + ")";
      return false;
    }
    if (s.has_ehk && s.ehk_index >= agg.ehk_table.size()) {
      error = "record " + std::to_string(i) + ": explicit_hash_key_index " +
              std::to_string(s.ehk_index) + " out of range (table has " +
              std::to_string(agg.ehk_table.size()) + ")";
      return false;
    }
    // Each term is at most the input size, and total <= limit before adding: compare by
    // subtraction so nothing can wrap.
    const std::size_t bytes[] = {
        agg.pk_table[static_cast<std::size_t>(s.pk_index)].size(),
        s.has_ehk ? agg.ehk_table[static_cast<std::size_t>(s.ehk_index)].size() : std::size_t{0},
        s.data.size()};
    for (std::size_t b : bytes) {
      if (b > limit - total) {
        error = "expands to more than " + std::to_string(limit) +
                " bytes of keys and data (DeaggregationLimits::max_expanded_bytes)";
        return false;
      }
      total += b;
    }
  }
  return true;
}

std::string describe(std::string_view shard_id, std::string_view seq) {
  std::string s = "KPL aggregate in shard ";
  s += shard_id;
  s += " seq ";
  s += seq;
  return s;
}

// The verdict on one Kinesis record, before any output is produced.
struct Verdict {
  DeaggregationOutcome outcome = DeaggregationOutcome::kPlain;
  std::string reason;
  ParsedAggregate parsed;  // filled for kDeaggregated
};

Verdict classify(const kinesis::KinesisRecord& in, std::string_view shard_id,
                 const DeaggregationLimits& limits) {
  Verdict v;
  const std::string_view data = in.data;
  if (!kpl::has_magic(data)) return v;  // kPlain

  auto corrupt = [&](std::string_view cause) {
    v.outcome = DeaggregationOutcome::kCorrupt;
    v.reason = describe(shard_id, in.sequence_number);
    v.reason += ": ";
    v.reason += cause;
    v.reason += "; delivered as it came";
    v.parsed = {};
    return std::move(v);
  };

  std::string_view body;
  switch (kpl::open_frame(data, body)) {
    case kpl::FrameCheck::kOk:
      break;
    case kpl::FrameCheck::kTooShort:
      return corrupt("shorter than magic + 16-byte MD5 (" + std::to_string(data.size()) +
                     " bytes)");
    case kpl::FrameCheck::kNoMd5:
      // MD5 unavailable (e.g. a FIPS-only OpenSSL): cannot verify, so cannot trust the body.
      return corrupt("MD5 could not be computed (OpenSSL)");
    case kpl::FrameCheck::kMd5Mismatch:
      return corrupt("MD5 mismatch");
  }

  std::string error;
  if (!parse_aggregate(body, v.parsed, error)) return corrupt(error);
  if (!validate(v.parsed, limits, error)) return corrupt(error);

  if (v.parsed.records.empty()) {
    v.outcome = DeaggregationOutcome::kEmptyAggregate;
    v.reason = describe(shard_id, in.sequence_number);
    v.reason += ": valid aggregate with no sub-records; nothing delivered";
    return v;
  }
  v.outcome = DeaggregationOutcome::kDeaggregated;
  return v;
}

void append_sub_records(const kinesis::KinesisRecord& in, std::string_view shard_id,
                        const std::shared_ptr<const void>& owner, const ParsedAggregate& agg,
                        std::vector<kcl::Record>& out) {
  // No exact reserve here: called once per aggregate on a growing vector, it would reallocate
  // (and move every record so far) on each call; emplace_back grows geometrically.
  // The tables and data are views into in.data, so into `owner`'s memory.
  kcl::Record::Views v;
  v.shard_id = shard_id;
  v.sequence_number = in.sequence_number;
  v.aggregated = true;
  v.approximate_arrival_timestamp = in.approximate_arrival_timestamp;
  std::uint64_t sub = 0;
  for (const SubView& s : agg.records) {
    v.sub_sequence_number = sub++;
    v.partition_key = agg.pk_table[static_cast<std::size_t>(s.pk_index)];
    v.explicit_hash_key =
        s.has_ehk ? agg.ehk_table[static_cast<std::size_t>(s.ehk_index)] : std::string_view{};
    v.data = s.data;
    out.emplace_back(owner, v);
  }
}

void append_as_it_came(const kinesis::KinesisRecord& in, std::string_view shard_id,
                       const std::shared_ptr<const void>& owner, std::vector<kcl::Record>& out) {
  kcl::Record::Views v;
  v.shard_id = shard_id;
  v.sequence_number = in.sequence_number;
  v.partition_key = in.partition_key;
  v.explicit_hash_key = in.explicit_hash_key;
  v.approximate_arrival_timestamp = in.approximate_arrival_timestamp;
  v.data = in.data;
  out.emplace_back(owner, v);
}

// Copies of a record's strings (and the shard id) that records can point into.
std::shared_ptr<const void> copy_of(kinesis::KinesisRecord& in, std::string_view& shard_id) {
  auto buf = std::make_shared<kinesis::RecordsBuffer>();
  buf->shard_id.assign(shard_id);
  shard_id = buf->shard_id;
  for (std::string_view* s :
       {&in.sequence_number, &in.partition_key, &in.explicit_hash_key, &in.data}) {
    *s = buf->unescaped.emplace_back(*s);
  }
  return buf;
}

std::string_view strip_leading_zeros(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i + 1 < s.size() && s[i] == '0') ++i;
  return s.substr(i);
}

}  // namespace

std::string_view to_string(DeaggregationOutcome outcome) noexcept {
  switch (outcome) {
    case DeaggregationOutcome::kPlain:
      return "plain";
    case DeaggregationOutcome::kDeaggregated:
      return "deaggregated";
    case DeaggregationOutcome::kEmptyAggregate:
      return "empty_aggregate";
    case DeaggregationOutcome::kCorrupt:
      return "corrupt";
  }
  return "unknown";
}

DeaggregationResult deaggregate(const kinesis::KinesisRecord& in, std::string_view shard_id,
                                const std::shared_ptr<const void>& owner,
                                std::vector<kcl::Record>& out, const DeaggregationLimits& limits) {
  DeaggregationResult result;
  if (!kpl::has_magic(in.data)) {
    // The common case, without building a verdict.
    append_as_it_came(in, shard_id, owner, out);
    result.records_appended = 1;
    return result;
  }
  Verdict v = classify(in, shard_id, limits);
  result.outcome = v.outcome;
  result.reason = std::move(v.reason);
  switch (v.outcome) {
    case DeaggregationOutcome::kDeaggregated:
      // The views in v.parsed point into in.data, which `owner` keeps alive.
      append_sub_records(in, shard_id, owner, v.parsed, out);
      result.records_appended = v.parsed.records.size();
      break;
    case DeaggregationOutcome::kEmptyAggregate:
      break;
    case DeaggregationOutcome::kPlain:
    case DeaggregationOutcome::kCorrupt:
      append_as_it_came(in, shard_id, owner, out);
      result.records_appended = 1;
      break;
  }
  return result;
}

DeaggregationResult deaggregate(const kinesis::KinesisRecord& in, std::string_view shard_id,
                                std::vector<kcl::Record>& out, const DeaggregationLimits& limits) {
  kinesis::KinesisRecord copy = in;
  std::shared_ptr<const void> owner = copy_of(copy, shard_id);
  return deaggregate(copy, shard_id, owner, out, limits);
}

DeaggregationStats deaggregate_all(std::vector<kinesis::KinesisRecord>&& in,
                                   std::string_view shard_id, std::vector<kcl::Record>& out,
                                   const DeaggregationLimits& limits) {
  DeaggregationStats stats;
  out.reserve(out.size() + in.size());
  for (kinesis::KinesisRecord& rec : in) {
    DeaggregationResult r = deaggregate(rec, shard_id, out, limits);
    switch (r.outcome) {
      case DeaggregationOutcome::kPlain:
        ++stats.plain;
        break;
      case DeaggregationOutcome::kDeaggregated:
        ++stats.aggregates;
        stats.sub_records += r.records_appended;
        break;
      case DeaggregationOutcome::kEmptyAggregate:
        ++stats.aggregates;
        ++stats.empty_aggregates;
        stats.reasons.push_back(std::move(r.reason));
        break;
      case DeaggregationOutcome::kCorrupt:
        ++stats.corrupt;
        stats.reasons.push_back(std::move(r.reason));
        break;
    }
  }
  in.clear();
  return stats;
}

int compare_sequence_numbers(std::string_view a, std::string_view b) noexcept {
  a = strip_leading_zeros(a);
  b = strip_leading_zeros(b);
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

bool after_checkpoint(const kcl::Record& r, std::string_view checkpoint_seq,
                      std::uint64_t checkpoint_subseq) noexcept {
  const int c = compare_sequence_numbers(r.sequence_number(), checkpoint_seq);
  if (c != 0) return c > 0;
  return r.sub_sequence_number() > checkpoint_subseq;
}

std::size_t drop_through_checkpoint(std::vector<kcl::Record>& records,
                                    std::string_view checkpoint_seq,
                                    std::uint64_t checkpoint_subseq) {
  const auto first_removed =
      std::remove_if(records.begin(), records.end(), [&](const kcl::Record& r) {
        return !after_checkpoint(r, checkpoint_seq, checkpoint_subseq);
      });
  const auto n = static_cast<std::size_t>(records.end() - first_removed);
  records.erase(first_removed, records.end());
  return n;
}

std::optional<ShardHashRange> parse_shard_hash_range(std::string_view start, std::string_view end) {
  const std::optional<kpl::HashKey> s = kpl::parse_hash_key(start);
  const std::optional<kpl::HashKey> e = kpl::parse_hash_key(end);
  if (!s || !e || *s > *e) return std::nullopt;
  return ShardHashRange{*s, *e};
}

namespace {

bool inside(const kcl::Record& r, const ShardHashRange& range) {
  kpl::HashKey key = 0;
  if (!r.explicit_hash_key().empty()) {
    const std::optional<kpl::HashKey> ehk = kpl::parse_hash_key(r.explicit_hash_key());
    if (!ehk) return true;  // not a hash key: no ground to drop anything
    key = *ehk;
  } else {
    key = kpl::partition_key_hash(r.partition_key());
  }
  return key >= range.start && key <= range.end;
}

}  // namespace

std::size_t drop_aggregates_outside(std::vector<kcl::Record>& records, const ShardHashRange& range,
                                    std::string* first_dropped) {
  std::size_t kept = 0, dropped = 0;
  for (std::size_t i = 0; i < records.size();) {
    // [i, j): one Kinesis record's records (an aggregate's, or a plain record alone).
    std::size_t j = i + 1;
    bool outside = false;
    if (records[i].aggregated()) {
      while (j < records.size() && records[j].aggregated() &&
             records[j].sequence_number() == records[i].sequence_number()) {
        ++j;
      }
      for (std::size_t k = i; k < j && !outside; ++k) outside = !inside(records[k], range);
    }
    if (outside) {
      if (dropped++ == 0 && first_dropped != nullptr) {
        first_dropped->assign(records[i].sequence_number());
      }
    } else {
      for (std::size_t k = i; k < j; ++k, ++kept) {
        if (kept != k) records[kept] = std::move(records[k]);
      }
    }
    i = j;
  }
  records.erase(records.begin() + static_cast<std::ptrdiff_t>(kept), records.end());
  return dropped;
}

}  // namespace kcl::retrieval
