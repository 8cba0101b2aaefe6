// make_stream_dead_letter_sink: each letter as one record of another stream, through the
// library's Producer.
#include "kcl/dead_letter.h"
#include "kcl/producer.h"

namespace kcl {

namespace {

class StreamSink final : public DeadLetterSink {
 public:
  explicit StreamSink(Producer& producer) : producer_(producer) {}

  // Waits for the producer to resolve the record (its retries included): accepted once it
  // has a sequence number; its error otherwise (the letter is asked again later).
  Status accept(const DeadLetter& letter) override {
    std::string key(letter.record.partition_key());
    if (key.empty()) key = letter.shard_id;  // a partition key is required
    std::future<Result<PutResult>> put = producer_.put(std::move(key), dead_letter_json(letter));
    Result<PutResult> written = put.get();
    if (!written.ok()) {
      return Status(written.status().code(), "dead-letter stream: " + written.status().message());
    }
    return Status::Ok();
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
