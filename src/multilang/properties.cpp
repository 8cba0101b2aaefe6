#include "multilang/properties.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "kcl/multilang.h"
#include "kcl/worker_options.h"
#include "worker/stream_set.h"

namespace kcl::multilang {

namespace {
std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}
// The .properties escapes: \t \n \r \f, \uXXXX (to UTF-8), and \x for any other x.
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    if (c == 't') {
      out += '\t';
    } else if (c == 'n') {
      out += '\n';
    } else if (c == 'r') {
      out += '\r';
    } else if (c == 'f') {
      out += '\f';
    } else if (c == 'u' && i + 4 < s.size()) {
      const unsigned long cp = std::strtoul(s.substr(i + 1, 4).c_str(), nullptr, 16);
      i += 4;
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    } else {
      out += c;
    }
  }
  return out;
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// 9999-12-31T23:59:59Z: no later AT_TIMESTAMP is meaningful, and a value in milliseconds
// (thirteen digits today) lies beyond it, so that mistake is reported, not obeyed.
constexpr long long kMaxEpochSeconds = 253402300799;
// Threads of the worker's pool (read_thread_pool): unset, and for the Java daemon's "no bound".
constexpr int kDefaultThreads = 64;
constexpr int kMaxThreads = 256;

// The Java daemon's credentials provider names (SDK v1 and v2, with or without their package)
// whose credentials kcl-cpp's standard chain also finds: the whole default chain, or one of
// its links.
bool is_standard_chain_provider(const std::string& name) {
  static const std::set<std::string> names = {"DefaultCredentialsProvider",
                                              "DefaultAWSCredentialsProviderChain",
                                              "EnvironmentVariableCredentialsProvider",
                                              "SystemPropertyCredentialsProvider",
                                              "SystemPropertiesCredentialsProvider",
                                              "ProfileCredentialsProvider",
                                              "InstanceProfileCredentialsProvider",
                                              "ContainerCredentialsProvider",
                                              "EC2ContainerCredentialsProviderWrapper",
                                              "WebIdentityTokenFileCredentialsProvider",
                                              "WebIdentityTokenCredentialsProvider"};
  return names.count(name) > 0;
}

// AwsCredentialsProvider = NAME[|ARG...][, NAME...]. Names the standard chain covers are
// accepted (ProfileCredentialsProvider|NAME selects that profile); any other value is a
// warning, and the standard chain is used.
void read_credentials_provider(const char* key, const std::string& value, MultiLangSettings& s) {
  std::vector<std::string> unknown;
  std::istringstream list(value);
  for (std::string entry; std::getline(list, entry, ',');) {
    entry = trim(entry);
    if (entry.empty()) continue;
    std::vector<std::string> parts;
    std::istringstream fields(entry);
    for (std::string part; std::getline(fields, part, '|');) parts.push_back(trim(part));
    std::string name = parts.empty() ? entry : parts[0];
    if (const auto dot = name.rfind('.'); dot != std::string::npos) name = name.substr(dot + 1);
    if (!is_standard_chain_provider(name)) {
      unknown.push_back(entry);
    } else if (name == "ProfileCredentialsProvider" && parts.size() > 1 && !parts[1].empty() &&
               s.worker.aws.profile.empty()) {
      s.worker.aws.profile = parts[1];
    }
  }
  if (!unknown.empty()) {
    s.warnings.push_back(std::string(key) + " = '" + value +
                         "': kcl-cpp does not understand this credentials provider and uses "
                         "the standard credentials chain (environment, shared profile files, "
                         "web identity, container, instance metadata) instead");
  }
}

using std::chrono::milliseconds;

// Reads typed values from the properties, keeping a problem for each malformed one.
class PropertyReader {
 public:
  explicit PropertyReader(const std::map<std::string, std::string>& p) : p_(p) {}

  // The value of `key`; null when absent or empty.
  const std::string* get(const char* key) const {
    auto it = p_.find(key);
    return it == p_.end() || it->second.empty() ? nullptr : &it->second;
  }

  std::optional<long long> number(const char* key, long long lo, long long hi,
                                  const char* unit = "") {
    const std::string* v = get(key);
    if (!v) return std::nullopt;
    char* end = nullptr;
    const long long n = std::strtoll(v->c_str(), &end, 10);
    if (*end != '\0' || n < lo || n > hi) {
      problem(std::string(key) + " = '" + *v + "' is not a number between " + std::to_string(lo) +
              " and " + std::to_string(hi) + unit);
      return std::nullopt;
    }
    return n;
  }

  // true / false in any case, as Java's Boolean.parseBoolean reads them, except that
  // anything else is an error here instead of a silent false.
  std::optional<bool> boolean(const char* key) {
    const std::string* v = get(key);
    if (!v) return std::nullopt;
    const std::string lower = lowercase(*v);
    if (lower == "true") return true;
    if (lower == "false") return false;
    problem(std::string(key) + " = '" + *v + "' is not a boolean: use true or false (any case)");
    return std::nullopt;
  }

  void problem(std::string text) { problems_.push_back(std::move(text)); }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  const std::map<std::string, std::string>& p_;
  std::vector<std::string> problems_;
};

// "a, b ,c" -> {"a", "b", "c"} (empty items dropped).
std::vector<std::string> split_list(const std::string& v) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= v.size()) {
    std::size_t end = v.find(',', start);
    if (end == std::string::npos) end = v.size();
    std::string item = v.substr(start, end - start);
    const auto first = item.find_first_not_of(" \t");
    if (first != std::string::npos) {
      out.push_back(item.substr(first, item.find_last_not_of(" \t") - first + 1));
    }
    start = end + 1;
  }
  return out;
}

// Keys whose value is taken as it is, besides the worker options' Java keys (the table of
// kcl/worker_options.h).
struct TextKey {
  const char* key;
  void (*set)(MultiLangSettings& s, const std::string& value);
};
constexpr TextKey kTextKeys[] = {
    {"executableName",
     [](MultiLangSettings& s, const std::string& v) { s.child.command = split_command(v); }},
    // kcl-cpp's own: several streams through one lease table ("a, b, c").
    {"streamNames",
     [](MultiLangSettings& s, const std::string& v) {
       for (std::string& name : split_list(v)) s.worker.streams.push_back(StreamConfig{name, {}});
       if (s.worker.streams.size() == 1) {
         s.worker.stream_name = s.worker.streams.front().name;
         s.worker.streams.clear();
       }
     }},
    // kcl-cpp's own: poison records (properties.h).
    {"deadLetterFile", [](MultiLangSettings& s, const std::string& v) { s.dead_letter_file = v; }},
    {"deadLetterStream",
     [](MultiLangSettings& s, const std::string& v) { s.dead_letter_stream = v; }},
};

// Keys whose value is a whole number in [lo, hi], besides the worker options' Java keys.
struct NumberKey {
  const char* key;
  long long lo;
  long long hi;
  void (*set)(MultiLangSettings& s, long long n);
};
constexpr NumberKey kNumberKeys[] = {
    {"timeoutInSeconds", 1, 7 * 24 * 3600,
     [](MultiLangSettings& s, long long n) { s.child.response_timeout = std::chrono::seconds(n); }},
};

constexpr const char* kCredentialsProviderKeys[] = {
    "AwsCredentialsProvider", "AWSCredentialsProvider", "AwsCredentialsProviderDynamoDB",
    "AwsCredentialsProviderCloudWatch"};

// Keys read by code of their own below, or understood and not needed: processingLanguage,
// and what kcl-cpp always does (processRecords only with records, leases of finished shards
// cleaned up by shard sync).
constexpr const char* kOtherKeys[] = {"streamArn",
                                      "initialPositionInStream",
                                      "initialPositionInStreamExtended",
                                      "retrievalMode",
                                      "processingLanguage",
                                      "callProcessRecordsEvenForEmptyRecordList",
                                      "cleanupLeasesUponShardCompletion"};

// An option whose Java key this file reads through the table (a text, a number or a duration
// in milliseconds); the others' keys are read by code of their own above and below.
bool has_java_key(const WorkerOption& o) {
  return !o.property.empty() && (o.kind == OptionKind::kText || o.kind == OptionKind::kInteger ||
                                 o.kind == OptionKind::kDuration);
}

// "failoverTimeMillis = '5' is not a number between 100 and 3600000": the option's bounds
// that hold whatever the other options (the rest is validate()'s).
std::optional<long long> java_number(PropertyReader& r, const WorkerOption& o) {
  const std::string key(o.property);
  const bool has_lo = o.lo_note.empty() && o.lo > -kUnbounded;
  const bool has_hi = o.hi_note.empty() && o.hi < kUnbounded;
  const long long lo = has_lo ? static_cast<long long>(o.lo) : 0;
  const long long hi =
      has_hi ? static_cast<long long>(o.hi) : std::numeric_limits<long long>::max();
  if (o.zero_allowed) {
    if (const std::string* v = r.get(key.c_str()); v != nullptr && *v == "0") return 0;
  }
  return r.number(key.c_str(), lo, hi, o.zero_allowed ? " (or 0)" : "");
}

// The worker options' Java keys (failoverTimeMillis, maxRecords, regionName, ...).
void read_java_keys(PropertyReader& r, MultiLangSettings& s) {
  for (const WorkerOption& o : worker_options()) {
    if (!has_java_key(o)) continue;
    const std::string key(o.property);
    if (r.get(key.c_str()) == nullptr) continue;
    std::string text = *r.get(key.c_str());
    if (o.kind != OptionKind::kText) {
      const auto n = java_number(r, o);
      if (!n) continue;
      text = std::to_string(*n) + (o.kind == OptionKind::kDuration ? "ms" : "");
    }
    if (Status st = set_worker_option(s.worker, o.name, text); !st.ok()) {
      r.problem(key + ": " + st.message());
    }
  }
}

// kcl-cpp's own keys: any worker option by its name, in the text form of `kcl consume
// --option` (durations with a unit); they apply after the Java keys.
void read_option_keys(const std::map<std::string, std::string>& p, PropertyReader& r,
                      MultiLangSettings& s) {
  for (const auto& [key, value] : p) {
    if (value.empty() || find_worker_option(key) == nullptr) continue;  // empty: absent
    if (Status st = set_worker_option(s.worker, key, value); !st.ok()) {
      r.problem(st.message());
    }
  }
}

bool is_known_key(const std::string& key) {
  for (const TextKey& k : kTextKeys) {
    if (key == k.key) return true;
  }
  for (const NumberKey& k : kNumberKeys) {
    if (key == k.key) return true;
  }
  for (const char* k : kCredentialsProviderKeys) {
    if (key == k) return true;
  }
  for (const char* k : kOtherKeys) {
    if (key == k) return true;
  }
  for (const WorkerOption& o : worker_options()) {
    if (key == o.name || (has_java_key(o) && key == o.property)) return true;
  }
  return false;
}

void check_required(PropertyReader& r) {
  for (const char* key : {"executableName", "applicationName"}) {
    if (!r.get(key)) r.problem(std::string(key) + " is required");
  }
  if (!r.get("streamName") && !r.get("streamArn") && !r.get("streamNames")) {
    r.problem("streamName (or streamArn, or streamNames) is required");
  }
}

// streamArn = arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME (PARTITION aws, aws-cn,
// aws-us-gov, ...): the stream's name (over streamName), and its region unless regionName
// gives one. Read field by field; anything else is refused, naming what is wrong.
void read_stream_arn(PropertyReader& r, MultiLangSettings& s) {
  const std::string* v = r.get("streamArn");
  if (!v) return;
  const std::vector<std::string> fields = worker::arn_fields(*v);
  const auto refuse = [&](const std::string& why) {
    r.problem("streamArn = '" + *v + "' is not a Kinesis stream ARN (" + why +
              "; expected arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME)");
  };
  if (fields.size() != 6 || fields[0] != "arn") return refuse("not six fields after 'arn:'");
  const std::string& partition = fields[1];
  const std::string& region = fields[3];
  const std::string& account = fields[4];
  const std::string& resource = fields[5];
  if (partition.rfind("aws", 0) != 0) return refuse("partition '" + partition + "'");
  if (fields[2] != "kinesis") return refuse("service '" + fields[2] + "', not kinesis");
  const auto lower_digit_dash = [](const std::string& f) {
    return !f.empty() && std::all_of(f.begin(), f.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    });
  };
  if (!lower_digit_dash(region)) return refuse("region '" + region + "'");
  if (account.size() != 12 ||
      !std::all_of(account.begin(), account.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return refuse("account '" + account + "', not 12 digits");
  }
  if (resource.rfind("stream/", 0) != 0) return refuse("resource '" + resource + "'");
  const std::string name = resource.substr(7);
  if (auto problem = worker::stream_name_problem(name)) return refuse("stream name " + *problem);
  s.worker.stream_name = name;
  if (s.worker.aws.region.empty()) s.worker.aws.region = region;
}

void read_initial_position(PropertyReader& r, MultiLangSettings& s) {
  const std::string* given = r.get("initialPositionInStream");
  if (!given) return;
  // Any case, as the Java daemon reads its enums ("trim_horizon").
  const std::string v = lowercase(*given);
  if (v == "trim_horizon") {
    s.worker.initial_position = InitialPosition::trim_horizon();
  } else if (v == "latest") {
    s.worker.initial_position = InitialPosition::latest();
  } else if (v == "at_timestamp") {
    // Epoch seconds, as the Java daemon reads it (it multiplies by 1000). The upper bound
    // (year 9999) keeps a value written in milliseconds by mistake from being accepted.
    if (auto secs =
            r.number("initialPositionInStreamExtended", 0, kMaxEpochSeconds, " (epoch seconds)")) {
      s.worker.initial_position = InitialPosition::at_timestamp(
          std::chrono::system_clock::time_point(std::chrono::seconds(*secs)));
    } else if (!r.get("initialPositionInStreamExtended")) {
      r.problem(
          "initialPositionInStream = AT_TIMESTAMP needs initialPositionInStreamExtended "
          "(epoch seconds, e.g. 1700000000)");
    }
  } else {
    r.problem("initialPositionInStream = '" + *given +
              "' is not TRIM_HORIZON, LATEST or AT_TIMESTAMP");
  }
}

// The Java daemon's polling keys: with one of them set, its DEFAULT retrieval mode polls.
constexpr const char* kPollingKeys[] = {"maxRecords", "idleTimeBetweenReadsInMillis",
                                        "retryGetRecordsInSeconds", "maxGetRecordsThreadPool"};

// FANOUT, POLLING or DEFAULT (any case), as the Java daemon reads them: DEFAULT reads with
// enhanced fan-out unless a polling key is set. Unset, kcl-cpp polls (fan-out is billed per
// shard-hour, so it is asked for by name; docs/multilang.md says where the Java daemon
// differs).
void read_retrieval_mode(PropertyReader& r, MultiLangSettings& s) {
  const std::string* given = r.get("retrievalMode");
  if (!given) return;
  bool polling_keys = false;
  for (const char* key : kPollingKeys) polling_keys = polling_keys || r.get(key) != nullptr;
  const std::string v = lowercase(*given);
  if (v == "fanout" || (v == "default" && !polling_keys)) {
    s.worker.retrieval.mode = RetrievalMode::kFanOut;
  } else if (v != "polling" && v != "default") {
    r.problem("retrievalMode = '" + *given + "' is not FANOUT, POLLING or DEFAULT");
  }
}

// maxActiveThreads, the threads that run the shards' exchanges with their children (each
// waits on its child while it works) and their reads. The Java daemon's pool has no bound
// unless the key sets one (0 or less: none); kcl-cpp's has: 64 unset, 256 for "none".
void read_thread_pool(const std::map<std::string, std::string>& p, MultiLangSettings& s,
                      std::map<std::string, std::string>& adjusted) {
  s.worker.processing.thread_pool_size = kDefaultThreads;
  auto it = p.find("maxActiveThreads");
  if (it == p.end()) return;
  char* end = nullptr;
  const long long n = std::strtoll(it->second.c_str(), &end, 10);
  if (end != it->second.c_str() && *end == '\0' && n <= 0) {
    adjusted["maxActiveThreads"] = std::to_string(kMaxThreads);
  }
}

// The Java daemon's switches for behaviour kcl-cpp does not offer: a warning when set the
// other way.
void read_unsupported_switches(PropertyReader& r, MultiLangSettings& s) {
  if (r.boolean("callProcessRecordsEvenForEmptyRecordList").value_or(false)) {
    s.warnings.emplace_back(
        "callProcessRecordsEvenForEmptyRecordList = true is not supported: kcl-cpp sends "
        "processRecords only with records, so a child that flushes on an empty batch must "
        "flush on its next records or at shutdownRequested instead");
  }
  if (!r.boolean("cleanupLeasesUponShardCompletion").value_or(true)) {
    s.warnings.emplace_back(
        "cleanupLeasesUponShardCompletion = false is not supported: kcl-cpp always removes "
        "the lease of a finished shard once its children have started");
  }
}

}  // namespace

std::vector<std::string> known_property_keys() {
  std::vector<std::string> keys;
  for (const TextKey& k : kTextKeys) keys.emplace_back(k.key);
  for (const NumberKey& k : kNumberKeys) keys.emplace_back(k.key);
  for (const char* k : kCredentialsProviderKeys) keys.emplace_back(k);
  for (const char* k : kOtherKeys) keys.emplace_back(k);
  for (const WorkerOption& o : worker_options()) {
    if (has_java_key(o)) keys.emplace_back(o.property);
  }
  return keys;
}

Result<std::map<std::string, std::string>> parse_properties(const std::string& text,
                                                            const std::string& origin) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  std::string pending;
  int pending_start = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    std::string line = trim(raw);
    if (pending.empty()) {
      pending_start = line_no;
      if (line.empty() || line[0] == '#' || line[0] == '!') continue;
    }
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      pending += line;
      continue;
    }
    pending += line;
    const std::size_t sep = pending.find_first_of("=:");
    if (sep == std::string::npos) {
      return Status(StatusCode::kInvalidArgument,
                    origin + " line " + std::to_string(pending_start) +
                        ": expected key = value, got '" + pending.substr(0, 80) + "'");
    }
    out[unescape(trim(pending.substr(0, sep)))] = unescape(trim(pending.substr(sep + 1)));
    pending.clear();
  }
  return out;
}

Result<MultiLangSettings> settings_from_properties(
    const std::map<std::string, std::string>& given) {
  MultiLangSettings s;
  std::map<std::string, std::string> p = given;
  read_thread_pool(given, s, p);
  PropertyReader r(p);
  check_required(r);
  read_java_keys(r, s);
  for (const TextKey& k : kTextKeys) {
    if (const std::string* v = r.get(k.key)) k.set(s, *v);
  }
  // After regionName, which wins over the ARN's region.
  read_stream_arn(r, s);
  read_initial_position(r, s);
  for (const NumberKey& k : kNumberKeys) {
    if (auto n = r.number(k.key, k.lo, k.hi)) k.set(s, *n);
  }
  read_retrieval_mode(r, s);
  read_unsupported_switches(r, s);
  for (const char* key : kCredentialsProviderKeys) {
    if (const std::string* v = r.get(key)) read_credentials_provider(key, *v, s);
  }
  read_option_keys(p, r, s);
  for (const auto& [key, value] : p) {
    if (!is_known_key(key)) s.ignored_keys.push_back(key);
  }
  if (!r.problems().empty()) {
    std::string message = "the properties file has problems:";
    for (const auto& pr : r.problems()) message += "\n  - " + pr;
    return Status(StatusCode::kInvalidArgument, message);
  }
  return s;
}

}  // namespace kcl::multilang

namespace kcl {

Result<MultiLangProperties> read_multilang_properties(std::string_view text,
                                                      std::string_view origin) {
  auto props = multilang::parse_properties(std::string(text), std::string(origin));
  if (!props.ok()) return props.status();
  auto settings = multilang::settings_from_properties(*props);
  if (!settings.ok()) return settings.status();
  MultiLangProperties out;
  out.worker = std::move(settings->worker);
  out.command = std::move(settings->child.command);
  out.response_timeout = settings->child.response_timeout;
  out.dead_letter_file = std::move(settings->dead_letter_file);
  out.dead_letter_stream = std::move(settings->dead_letter_stream);
  out.ignored_keys = std::move(settings->ignored_keys);
  out.warnings = std::move(settings->warnings);
  return out;
}

}  // namespace kcl
