// make_callback_dead_letter_sink: the application's function as a sink.
#include "kcl/dead_letter.h"

namespace kcl {

namespace {

class CallbackSink final : public DeadLetterSink {
 public:
  CallbackSink(std::function<Status(const DeadLetter&)> accept, std::string name)
      : accept_(std::move(accept)), name_(std::move(name)) {}
  Status accept(const DeadLetter& letter) override { return accept_(letter); }
  std::string name() const override { return name_; }

 private:
  const std::function<Status(const DeadLetter&)> accept_;
  const std::string name_;
};

}  // namespace

std::shared_ptr<DeadLetterSink> make_callback_dead_letter_sink(
    std::function<Status(const DeadLetter&)> accept, std::string name) {
  return std::make_shared<CallbackSink>(std::move(accept), std::move(name));
}

}  // namespace kcl
