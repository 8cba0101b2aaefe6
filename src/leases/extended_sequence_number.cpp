#include <algorithm>
#include <string>

#include "kcl/lease.h"

namespace kcl {
namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

ExtendedSequenceNumber::Kind classify(std::string_view s) {
  using K = ExtendedSequenceNumber::Kind;
  if (all_digits(s)) return K::kSequenceNumber;
  if (s == ExtendedSequenceNumber::kTrimHorizonText) return K::kTrimHorizon;
  if (s == ExtendedSequenceNumber::kLatestText) return K::kLatest;
  if (s == ExtendedSequenceNumber::kAtTimestampText) return K::kAtTimestamp;
  if (s == ExtendedSequenceNumber::kShardEndText) return K::kShardEnd;
  return K::kInvalid;
}

// Position of a kind in the total order; sequence numbers sit between LATEST and SHARD_END.
int rank(ExtendedSequenceNumber::Kind k) {
  using K = ExtendedSequenceNumber::Kind;
  switch (k) {
    case K::kInvalid:
      return 0;
    case K::kAtTimestamp:
      return 1;
    case K::kTrimHorizon:
      return 2;
    case K::kLatest:
      return 3;
    case K::kSequenceNumber:
      return 4;
    case K::kShardEnd:
      return 5;
  }
  return 0;
}

std::string_view strip_leading_zeros(std::string_view s) {
  std::size_t i = 0;
  while (i + 1 < s.size() && s[i] == '0') ++i;
  return s.substr(i);
}

// Numeric comparison of two digit strings of any length.
std::strong_ordering compare_decimal(std::string_view a, std::string_view b) {
  a = strip_leading_zeros(a);
  b = strip_leading_zeros(b);
  if (a.size() != b.size()) return a.size() <=> b.size();
  int c = a.compare(b);
  return c < 0 ? std::strong_ordering::less
               : (c > 0 ? std::strong_ordering::greater : std::strong_ordering::equal);
}

}  // namespace

ExtendedSequenceNumber::ExtendedSequenceNumber(std::string sequence_number,
                                               SubSequenceNumber sub_sequence_number)
    : sequence_number_(std::move(sequence_number)),
      sub_sequence_number_(sub_sequence_number),
      kind_(classify(sequence_number_)) {}

Result<ExtendedSequenceNumber> ExtendedSequenceNumber::parse(
    std::string_view sequence_number, SubSequenceNumber sub_sequence_number) {
  if (classify(sequence_number) == Kind::kInvalid) {
    return Status(StatusCode::kInvalidArgument,
                  "sequence number \"" + std::string(sequence_number) +
                      "\" is neither a string of decimal digits nor one of TRIM_HORIZON, "
                      "LATEST, AT_TIMESTAMP, SHARD_END");
  }
  return ExtendedSequenceNumber(std::string(sequence_number), sub_sequence_number);
}

std::strong_ordering ExtendedSequenceNumber::operator<=>(
    const ExtendedSequenceNumber& other) const noexcept {
  int ra = rank(kind_);
  int rb = rank(other.kind_);
  if (ra != rb) return ra <=> rb;
  if (kind_ == Kind::kSequenceNumber) {
    auto c = compare_decimal(sequence_number_, other.sequence_number_);
    if (c != std::strong_ordering::equal) return c;
  } else if (kind_ == Kind::kInvalid) {
    int c = sequence_number_.compare(other.sequence_number_);
    if (c != 0) return c < 0 ? std::strong_ordering::less : std::strong_ordering::greater;
  }
  return sub_sequence_number_ <=> other.sub_sequence_number_;
}

std::string ExtendedSequenceNumber::to_string() const {
  if (sub_sequence_number_ == 0) return sequence_number_;
  return sequence_number_ + "#" + std::to_string(sub_sequence_number_);
}

}  // namespace kcl
