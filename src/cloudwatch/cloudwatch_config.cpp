#include "kcl/cloudwatch_config.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace kcl {

std::vector<std::string> CloudWatchMetricsConfig::validate() const {
  std::vector<std::string> problems;
  if (buffer_time < std::chrono::seconds(1) || buffer_time > std::chrono::minutes(10)) {
    problems.push_back("cloudwatch.buffer_time is " + std::to_string(buffer_time.count()) +
                       " ms; it must be between 1000 ms and 600000 ms");
  }
  if (max_series < 100 || max_series > 1000000) {
    problems.push_back("cloudwatch.max_series is " + std::to_string(max_series) +
                       "; it must be between 100 and 1000000");
  }
  if (metrics_namespace.size() > 255) {
    problems.emplace_back("cloudwatch.metrics_namespace is longer than 255 characters");
  }
  if (metrics_namespace.rfind("AWS/", 0) == 0) {
    problems.emplace_back(
        "cloudwatch.metrics_namespace starts with \"AWS/\", which CloudWatch reserves for AWS "
        "services");
  }
  return problems;
}

bool parse_metrics_level(const std::string& text, MetricsLevel& level) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (t == "NONE") {
    level = MetricsLevel::kNone;
  } else if (t == "SUMMARY") {
    level = MetricsLevel::kSummary;
  } else if (t == "DETAILED") {
    level = MetricsLevel::kDetailed;
  } else {
    return false;
  }
  return true;
}

}  // namespace kcl
