// base/unreadable_items.h: the log line of a table read that skipped items it could not read,
// once per series: the first read with a new set of unreadable items, then the 3rd, 10th,
// 100th, ... read with the same set (each with its count), and once when every item is
// readable again.
//
// Thread safety: all members may be called from many threads at once.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/repeat_report.h"
#include "kcl/logging.h"

namespace kcl::base {

struct ReportLine {
  LogLevel level;
  std::string text;
};

class UnreadableItems {
 public:
  // `what` names a readable item ("a readable lease"), `consequence` what skipping one means
  // ("their shards are not read until fixed").
  UnreadableItems(std::string what, std::string consequence)
      : what_(std::move(what)), consequence_(std::move(consequence)) {}

  // `unreadable`: one text per item skipped by a read (its key and why), in a stable order.
  std::optional<ReportLine> read(const std::vector<std::string>& unreadable) {
    std::lock_guard<std::mutex> lock(mu_);
    std::optional<ReportLine> line;
    if (unreadable != reported_) {
      reads_ = 0;
      if (unreadable.empty()) line = ReportLine{LogLevel::kInfo, "every item is readable again"};
      reported_ = unreadable;
    }
    if (!unreadable.empty() && worth_reporting(++reads_)) {
      std::string text = std::to_string(unreadable.size()) +
                         (unreadable.size() == 1 ? " item is" : " items are") + " not " + what_ +
                         " and skipped (" + consequence_ + "; " + std::to_string(reads_) +
                         (reads_ == 1 ? " read" : " reads in a row") + "): " + unreadable.front();
      if (unreadable.size() > 1) {
        text += "; and " + std::to_string(unreadable.size() - 1) + " more";
      }
      line = ReportLine{LogLevel::kWarn, std::move(text)};
    }
    return line;
  }

 private:
  const std::string what_;
  const std::string consequence_;
  std::mutex mu_;
  std::vector<std::string> reported_;  // the set last reported
  std::uint64_t reads_ = 0;            // reads in a row with that set
};

}  // namespace kcl::base
