// make_stream_dead_letter_sink: each letter as one record of another stream, through the
// library's Producer.
#include <future>
#include <string>
#include <vector>

#include "deadletter/dead_letter_parts.h"
#include "kcl/dead_letter.h"
#include "kcl/producer.h"

namespace kcl {

namespace {

// A Kinesis record's data and partition key together: 1 MiB.
constexpr std::size_t kMaxRecordBytes = std::size_t{1} << 20;

class StreamSink final : public DeadLetterSink {
 public:
  explicit StreamSink(Producer& producer) : producer_(producer) {}

  // Waits for the producer to resolve the record (its retries included): accepted once it
  // has a sequence number; its error otherwise (the letter is asked again later). A letter
  // too large for one record goes as several, in order under one partition key
  // (deadletter/dead_letter_parts.h), accepted once every part is written; asked again, the
  // parts are written again (a reader keeps one of each part).
  Status accept(const DeadLetter& letter) override {
    std::string key(letter.record.partition_key());
    if (key.empty()) key = letter.shard_id;  // a partition key is required
    const std::size_t room = kMaxRecordBytes - key.size();
    std::vector<std::string> parts = deadletter::dead_letter_json_parts(letter, room);
    // Accepted with nothing written, the letter would be lost.
    if (parts.empty()) {
      return Status(StatusCode::kInternal, "dead-letter stream: the letter made no record");
    }
    std::vector<std::future<Result<PutResult>>> puts;
    for (std::string& part : parts) {
      puts.push_back(producer_.put(key, std::move(part)));
    }
    Status first;
    for (std::size_t i = 0; i < puts.size(); ++i) {
      Result<PutResult> written = puts[i].get();
      if (!written.ok() && first.ok()) {
        const std::string which = puts.size() > 1 ? "part " + std::to_string(i + 1) + " of " +
                                                        std::to_string(puts.size()) + ": "
                                                  : std::string();
        first = Status(written.status().code(),
                       "dead-letter stream: " + which + written.status().message());
      }
    }
    return first;
  }
  std::string name() const override { return "stream"; }

 private:
  Producer& producer_;
};

}  // namespace

std::shared_ptr<DeadLetterSink> make_stream_dead_letter_sink(Producer& producer) {
  return std::make_shared<StreamSink>(producer);
}

}  // namespace kcl
