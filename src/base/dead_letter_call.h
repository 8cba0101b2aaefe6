// base/dead_letter_call.h: asks a dead-letter sink (kcl/dead_letter.h) to keep a letter. An
// exception from an application's sink is a refusal with its text, never a crash.
#pragma once

#include <exception>
#include <string>

#include "kcl/dead_letter.h"

namespace kcl::base {

inline Status ask_dead_letter_sink(DeadLetterSink& sink, const DeadLetter& letter) {
  try {
    return sink.accept(letter);
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string("the sink threw: ") + e.what());
  } catch (...) {
    return Status(StatusCode::kInternal, "the sink threw a non-standard exception");
  }
}

}  // namespace kcl::base
