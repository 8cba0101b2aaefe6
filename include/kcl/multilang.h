// kcl/multilang.h: a Java MultiLangDaemon properties file read into a worker configuration,
// exactly as `kcl multilang` reads it (the keys are listed in docs/multilang.md), for programs
// that run such an application's record processors themselves (the Python package's
// in-process runner, kcl.kclpy).
//
// Thread safety: a pure function.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "kcl/status.h"
#include "kcl/worker.h"

namespace kcl {

struct MultiLangProperties {
  WorkerConfig worker;
  std::vector<std::string> command;               // executableName, split into argv
  std::chrono::milliseconds response_timeout{0};  // timeoutInSeconds; 0 (unset): no limit
  std::string dead_letter_file;                   // deadLetterFile (the policy is set)
  std::string dead_letter_stream;                 // deadLetterStream (a sink to make)
  std::vector<std::string> ignored_keys;          // present but without meaning for kcl-cpp
  std::vector<std::string> warnings;              // understood but not honoured as asked
};

// `text` is the file's content, `origin` its name for messages. Errors: kInvalidArgument
// naming the line of a malformed line, or listing every missing or malformed key.
Result<MultiLangProperties> read_multilang_properties(std::string_view text,
                                                      std::string_view origin);

}  // namespace kcl
