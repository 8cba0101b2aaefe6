// metrics/tee_sink.h: a MetricsSink that forwards every point to two sinks (the worker's
// Prometheus registry, CloudWatch publishing, the user's sink).
//
// Thread safety: as the sinks it forwards to.
#pragma once

#include <memory>

#include "kcl/metrics.h"

namespace kcl::metrics {

class TeeMetricsSink final : public MetricsSink {
 public:
  TeeMetricsSink(std::shared_ptr<MetricsSink> a, std::shared_ptr<MetricsSink> b)
      : a_(std::move(a)), b_(std::move(b)) {}
  void count(std::string_view n, double v, MetricTags t) override {
    a_->count(n, v, t);
    b_->count(n, v, t);
  }
  void gauge(std::string_view n, double v, MetricTags t) override {
    a_->gauge(n, v, t);
    b_->gauge(n, v, t);
  }
  void timing(std::string_view n, std::chrono::nanoseconds v, MetricTags t) override {
    a_->timing(n, v, t);
    b_->timing(n, v, t);
  }
  void forget(MetricTags t) override {
    a_->forget(t);
    b_->forget(t);
  }

 private:
  std::shared_ptr<MetricsSink> a_, b_;
};

}  // namespace kcl::metrics
