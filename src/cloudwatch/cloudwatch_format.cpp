#include "cloudwatch/cloudwatch_format.h"

#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "base/text_length.h"
#include "base/time_text.h"

namespace kcl::cloudwatch {

namespace {

double value_of(const Datum& d) {
  if (!d.level && (d.unit == "Count" || d.unit == "Bytes")) return d.sum;
  return d.count > 0 ? d.sum / d.count : 0;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string form_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::vector<std::string> emf_lines(const std::vector<Datum>& datums, const PublishContext& ctx) {
  // Group by (operation, shard, stream): one directive's dimensions per line.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<const Datum*>> groups;
  for (const Datum& d : datums) groups[{d.operation, d.shard_id, d.stream}].push_back(&d);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(ctx.timestamp.time_since_epoch())
          .count();
  std::vector<std::string> lines;
  for (const auto& [key, members] : groups) {
    const auto& [operation, shard, stream] = key;
    for (std::size_t from = 0; from < members.size(); from += 100) {
      nlohmann::json dims = nlohmann::json::array();
      nlohmann::json root;
      auto add_dim = [&](const char* name, const std::string& value) {
        if (value.empty()) return;
        dims.push_back(name);
        root[name] = value;
      };
      add_dim("Operation", operation);
      add_dim("ShardId", shard);
      add_dim("StreamId", stream);
      add_dim("WorkerIdentifier", ctx.worker_id);
      nlohmann::json metrics = nlohmann::json::array();
      for (std::size_t i = from; i < std::min(members.size(), from + 100); ++i) {
        const Datum& d = *members[i];
        metrics.push_back({{"Name", d.name}, {"Unit", d.unit}});
        root[d.name] = value_of(d);
      }
      root["_aws"] = {{"Timestamp", ms},
                      {"CloudWatchMetrics",
                       nlohmann::json::array({{{"Namespace", ctx.metrics_namespace},
                                               {"Dimensions", nlohmann::json::array({dims})},
                                               {"Metrics", metrics}}})}};
      // Dimension values come from elsewhere (a stream's, a shard's name): bytes that are not
      // UTF-8 become U+FFFD rather than an exception on the publishing thread.
      lines.push_back(root.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
  }
  return lines;
}

namespace {

// CloudWatch's limits (the Dimension and MetricDatum API references).
constexpr std::size_t kMaxMetricNameChars = 255;
constexpr std::size_t kMaxDimensionValueChars = 1024;

// A dimension value as the service takes it: printable ASCII only, at most 1,024 characters.
std::string dimension_value(std::string_view v) {
  std::string out(v.substr(0, kMaxDimensionValueChars));
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7F) c = '?';
  }
  return out;
}

}  // namespace

std::vector<PutBody> put_metric_data_bodies(const std::vector<Datum>& datums,
                                            const PublishContext& ctx, std::size_t max_datums,
                                            std::size_t max_bytes,
                                            std::vector<std::string>* dropped) {
  const std::string head =
      "Action=PutMetricData&Version=2010-08-01&Namespace=" + form_encode(ctx.metrics_namespace);
  const std::string timestamp = form_encode(base::iso8601_seconds(ctx.timestamp));
  std::vector<PutBody> bodies;
  std::string body = head;
  std::size_t in_body = 0;
  for (const Datum& d : datums) {
    auto member = [&](std::size_t n) {
      const std::string p = "&MetricData.member." + std::to_string(n) + ".";
      std::string m =
          p + "MetricName=" + form_encode(d.name) + p + "Unit=" + d.unit + p +
          "Timestamp=" + timestamp + p + "StatisticValues.SampleCount=" + number(d.count) + p +
          "StatisticValues.Sum=" + number(d.sum) + p + "StatisticValues.Minimum=" + number(d.min) +
          p + "StatisticValues.Maximum=" + number(d.max);
      int dim = 0;
      auto add_dim = [&](std::string_view name, const std::string& value) {
        if (value.empty()) return;
        const std::string q = p + "Dimensions.member." + std::to_string(++dim) + ".";
        m += q + "Name=" + std::string(name) + q + "Value=" + form_encode(dimension_value(value));
      };
      add_dim("Operation", d.operation);
      add_dim("ShardId", d.shard_id);
      add_dim("StreamId", d.stream);
      add_dim("WorkerIdentifier", ctx.worker_id);
      return m;
    };
    if (base::utf16_length(d.name) > kMaxMetricNameChars) {
      if (dropped != nullptr) dropped->push_back(d.name);
      continue;
    }
    std::string m = member(in_body + 1);
    if (in_body > 0 && (in_body >= max_datums || body.size() + m.size() > max_bytes)) {
      bodies.push_back({std::move(body), in_body});
      body = head;
      in_body = 0;
      m = member(1);
    }
    body += m;
    ++in_body;
  }
  if (in_body > 0) bodies.push_back({std::move(body), in_body});
  return bodies;
}

}  // namespace kcl::cloudwatch
