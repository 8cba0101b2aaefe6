#include "metrics/metrics_registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <tuple>

namespace kcl::metrics {

namespace {

struct Known {
  std::string_view point;  // the library's metric point
  std::string_view family;
  std::string_view help;
};

// The library's metric points with their Prometheus names; docs/metrics.md mirrors this.
constexpr Known kKnown[] = {
    {"consumer.records_processed", "kcl_records_processed_total",
     "Records delivered to the processor and processed, per shard."},
    {"consumer.bytes_processed", "kcl_bytes_processed_total",
     "Bytes of record data processed, per shard."},
    {"consumer.millis_behind_latest", "kcl_millis_behind_latest",
     "How far the last GetRecords answer was behind the tip of the shard, in milliseconds."},
    {"processor.process_records", "kcl_processor_duration_seconds",
     "Time spent in the record processor's process_records call."},
    {"processor.failures", "kcl_processor_failures_total",
     "Processor callbacks that threw, per shard."},
    {"consumer.records_skipped", "kcl_records_skipped_total",
     "Records skipped unprocessed after the processor kept failing on their batch "
     "(on_processor_error = skip), per shard."},
    {"records.dead_lettered", "kcl_records_dead_lettered_total",
     "Records handed to the dead-letter sink (and accepted) after the processor kept failing on "
     "them, by stream, shard and sink."},
    {"leases.held", "kcl_leases_held", "Leases this worker holds."},
    {"leases.taken", "kcl_leases_taken_total", "Expired or free leases this worker took."},
    {"leases.stolen", "kcl_leases_stolen_total",
     "Leases this worker took from a more loaded worker."},
    {"leases.lost", "kcl_leases_lost_total", "Leases this worker lost to another worker."},
    {"leases.released", "kcl_leases_released_total",
     "Leases this worker handed back (graceful shutdown)."},
    {"leases.renew_latency", "kcl_lease_renew_duration_seconds",
     "Round trip of one lease renewal."},
    {"leases.failed_conditions", "kcl_lease_failed_conditions_total",
     "Conditional lease writes refused because another writer moved the lease."},
    {"leases.handoffs_requested", "kcl_lease_handoffs_requested_total",
     "Leases the leader asked this worker to hand to another (leader-based assignment)."},
    {"leases.handed_off", "kcl_leases_handed_off_total",
     "Leases this worker handed off after its consumer checkpointed."},
    {"leases.handoffs_forced", "kcl_lease_handoffs_forced_total",
     "Leases handed to this worker that it took after the handoff timeout."},
    {"membership.lost", "kcl_membership_lost_total",
     "Times this worker lost its membership (fenced or not renewed in time): every lease goes."},
    {"leader.elected", "kcl_leader_elected_total", "Times this worker became the leader."},
    {"leader.lost", "kcl_leader_lost_total",
     "Times this worker lost the leader lock (not counted when it hands the lock back at "
     "shutdown)."},
    {"leader.workers", "kcl_leader_workers", "Live workers the leader sees (on the leader)."},
    {"leader.assigned", "kcl_leader_assigned_total",
     "Free or orphaned leases the leader assigned (on the leader)."},
    {"leader.handoffs", "kcl_leader_handoffs_total",
     "Graceful handoffs the leader started to balance the fleet (on the leader)."},
    {"leader.fenced", "kcl_leader_fenced_total",
     "Silent workers the leader fenced before moving their leases (on the leader)."},
    {"checkpoint.result", "kcl_checkpoints_total", "Checkpoint writes by result."},
    {"retrieval.get_records", "kcl_get_records_duration_seconds",
     "Round trip of one GetRecords call."},
    {"aws.requests", "kcl_aws_requests_total",
     "AWS requests by service, operation and outcome (ok, throttled, error)."},
    {"aws.retries", "kcl_aws_retries_total", "AWS requests sent again after a retryable failure."},
    {"worker.consumers", "kcl_shard_consumers", "Shard consumers running in this worker."},
    {"shard.stalled", "kcl_shard_stalled",
     "1 while a shard of this worker is stalled, labelled with the cause; 0 once it is not."},
    {"worker.shards_stalled", "kcl_shards_stalled", "Shards of this worker stalled now."},
    {"fleet.leases_unheld", "kcl_leases_unheld",
     "Leases (not ended) no worker holds, from this worker's last read of the lease table."},
    {"leader.is_leader", "kcl_leader_is_leader",
     "1 while this worker holds the leader lock (leader-based assignment only)."},
};

void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
    out += std::to_string(static_cast<long long>(v));
  } else {
    // The shortest of %.15g / %.17g that reads back as the same double.
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.15g", v);
    if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
    out += buf;
  }
}

void add_double(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

void append_labels(std::string& out, const Labels& labels, std::string_view extra_key = {},
                   std::string_view extra_value = {}) {
  if (labels.empty() && extra_key.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    out += escape_label_value(v);
    out += '"';
  }
  if (!extra_key.empty()) {
    if (!first) out += ',';
    out += extra_key;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

std::string_view type_name(MetricKind k) {
  switch (k) {
    case MetricKind::kCounter:
      return "counter";
    case MetricKind::kGauge:
      return "gauge";
    case MetricKind::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::string escape_help(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

struct MetricsRegistry::Series {
  std::string family;
  MetricKind kind;
  Labels labels;
  std::atomic<double> value{0};
  std::array<std::atomic<std::uint64_t>, kDurationBuckets.size() + 1> buckets{};
  std::atomic<std::uint64_t> count{0};
  std::atomic<double> sum{0};
  std::atomic<bool> hidden{false};  // a gauge forgotten, until it is set again
};

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string sanitize_label_name(std::string_view key) {
  std::string out;
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (c >= '0' && c <= '9' && !out.empty());
    out += ok ? c : '_';
  }
  if (out.empty()) out = "_";
  // Names starting with __ are reserved for Prometheus itself.
  if (out.rfind("__", 0) == 0) out.insert(out.begin(), 'x');
  return out;
}

std::string MetricsRegistry::family_name(std::string_view name, MetricKind kind) {
  for (const Known& k : kKnown) {
    if (k.point == name) return std::string(k.family);
  }
  std::string out = "kcl_";
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  if (kind == MetricKind::kCounter) out += "_total";
  if (kind == MetricKind::kHistogram) out += "_seconds";
  return out;
}

std::string MetricsRegistry::help_text(const std::string& family) {
  for (const Known& k : kKnown) {
    if (k.family == family) return std::string(k.help);
  }
  return "kcl-cpp metric " + family + ".";
}

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Series& MetricsRegistry::series(std::string_view name, MetricKind kind,
                                                 MetricTags tags) {
  // The family is the same for a name whatever the kind the first caller used; a point used
  // with two kinds (a mistake) lands in two families with distinct suffixes.
  Labels labels;
  labels.reserve(tags.size());
  for (const MetricTag& t : tags) {
    labels.emplace_back(sanitize_label_name(t.key), std::string(t.value));
  }
  std::sort(labels.begin(), labels.end());
  std::string key(name);
  key += '\0';
  key += static_cast<char>('0' + static_cast<int>(kind));
  for (const auto& [k, v] : labels) {
    key += '\0';
    key += k;
    key += '\0';
    key += v;
  }
  {
    std::shared_lock lock(mu_);
    auto it = series_.find(key);
    if (it != series_.end()) return *it->second;
  }
  std::unique_lock lock(mu_);
  auto& slot = series_[key];
  if (!slot) {
    slot = std::make_unique<Series>();
    slot->family = family_name(name, kind);
    slot->kind = kind;
    slot->labels = std::move(labels);
  }
  return *slot;
}

void MetricsRegistry::count(std::string_view name, double value, MetricTags tags) {
  if (!(value >= 0)) return;  // counters only go up; a negative or NaN count is dropped
  add_double(series(name, MetricKind::kCounter, tags).value, value);
}

void MetricsRegistry::gauge(std::string_view name, double value, MetricTags tags) {
  Series& s = series(name, MetricKind::kGauge, tags);
  s.value.store(value, std::memory_order_relaxed);
  s.hidden.store(false, std::memory_order_relaxed);
}

void MetricsRegistry::forget(MetricTags tags) {
  Labels wanted;
  for (const MetricTag& t : tags) {
    wanted.emplace_back(sanitize_label_name(t.key), std::string(t.value));
  }
  if (wanted.empty()) return;
  std::shared_lock lock(mu_);
  for (const auto& [key, s] : series_) {
    if (s->kind != MetricKind::kGauge) continue;
    const bool all = std::all_of(wanted.begin(), wanted.end(), [&](const auto& w) {
      return std::find(s->labels.begin(), s->labels.end(), w) != s->labels.end();
    });
    if (all) s->hidden.store(true, std::memory_order_relaxed);
  }
}

void MetricsRegistry::timing(std::string_view name, std::chrono::nanoseconds value,
                             MetricTags tags) {
  Series& s = series(name, MetricKind::kHistogram, tags);
  double seconds = std::chrono::duration<double>(value).count();
  std::size_t i = 0;
  while (i < kDurationBuckets.size() && seconds > kDurationBuckets[i]) ++i;
  s.buckets[i].fetch_add(1, std::memory_order_relaxed);
  add_double(s.sum, seconds);
  s.count.fetch_add(1, std::memory_order_relaxed);
}

std::vector<SeriesSnapshot> MetricsRegistry::snapshot() const {
  std::vector<SeriesSnapshot> out;
  {
    std::shared_lock lock(mu_);
    out.reserve(series_.size());
    for (const auto& [key, s] : series_) {
      if (s->hidden.load(std::memory_order_relaxed)) continue;
      SeriesSnapshot snap;
      snap.family = s->family;
      snap.kind = s->kind;
      snap.labels = s->labels;
      snap.value = s->value.load(std::memory_order_relaxed);
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < s->buckets.size(); ++i) {
        cumulative += s->buckets[i].load(std::memory_order_relaxed);
        snap.buckets[i] = cumulative;
      }
      // count is the +Inf bucket, so _count and the buckets always agree in one scrape.
      snap.count = cumulative;
      snap.sum = s->sum.load(std::memory_order_relaxed);
      out.push_back(std::move(snap));
    }
  }
  std::sort(out.begin(), out.end(), [](const SeriesSnapshot& a, const SeriesSnapshot& b) {
    return std::tie(a.family, a.labels) < std::tie(b.family, b.labels);
  });
  return out;
}

std::string MetricsRegistry::prometheus_text() const {
  std::vector<SeriesSnapshot> all = snapshot();
  std::string out;
  std::string current;
  for (const SeriesSnapshot& s : all) {
    if (s.family != current) {
      current = s.family;
      out += "# HELP " + s.family + " " + escape_help(help_text(s.family)) + "\n";
      out += "# TYPE " + s.family + " " + std::string(type_name(s.kind)) + "\n";
    }
    if (s.kind != MetricKind::kHistogram) {
      out += s.family;
      append_labels(out, s.labels);
      out += ' ';
      append_number(out, s.value);
      out += '\n';
      continue;
    }
    for (std::size_t i = 0; i < s.buckets.size(); ++i) {
      std::string le;
      if (i < kDurationBuckets.size()) {
        append_number(le, kDurationBuckets[i]);
      } else {
        le = "+Inf";
      }
      out += s.family + "_bucket";
      append_labels(out, s.labels, "le", le);
      out += ' ';
      append_number(out, static_cast<double>(s.buckets[i]));
      out += '\n';
    }
    out += s.family + "_sum";
    append_labels(out, s.labels);
    out += ' ';
    append_number(out, s.sum);
    out += '\n';
    out += s.family + "_count";
    append_labels(out, s.labels);
    out += ' ';
    append_number(out, static_cast<double>(s.count));
    out += '\n';
  }
  return out;
}

}  // namespace kcl::metrics
