// kcl/metrics.h: where kcl-cpp reports what it measures. Implement MetricsSink to forward to
// your metrics system (CloudWatch, StatsD, Prometheus...); the default discards everything.
//
// Names are short dotted words ("leases.held"); tags narrow a metric down ("operation" =
// "renew"). Each component documents the metrics it emits next to its class.
//
// Thread safety: kcl-cpp calls a sink from several of its threads at once; implementations
// must be thread-safe and should return quickly (no blocking I/O on the caller's thread).
#pragma once

#include <chrono>
#include <span>
#include <string_view>

namespace kcl {

struct MetricTag {
  std::string_view key;
  std::string_view value;
};

// Views into the caller's strings: copy what you keep beyond the call.
using MetricTags = std::span<const MetricTag>;

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // Something happened `value` times (leases taken, conditions failed...).
  virtual void count(std::string_view name, double value, MetricTags tags) = 0;
  // The current level of something (leases held).
  virtual void gauge(std::string_view name, double value, MetricTags tags) = 0;
  // How long something took (a renewal round trip).
  virtual void timing(std::string_view name, std::chrono::nanoseconds value, MetricTags tags) = 0;
  // Levels carrying every one of `tags` are no longer this worker's to report (a shard it
  // stopped reading: its lag, its queue): a sink that keeps the last level of a gauge drops
  // them, so that no stale level (an alert's "behind" for a shard another worker now reads)
  // outlives the shard here. A gauge set again afterwards is reported again.
  virtual void forget(MetricTags /*tags*/) {}
};

// Discards everything; the default sink.
class NoopMetricsSink final : public MetricsSink {
 public:
  void count(std::string_view, double, MetricTags) override {}
  void gauge(std::string_view, double, MetricTags) override {}
  void timing(std::string_view, std::chrono::nanoseconds, MetricTags) override {}
  // A shared, stateless instance.
  static NoopMetricsSink& instance() {
    static NoopMetricsSink sink;
    return sink;
  }
};

}  // namespace kcl
