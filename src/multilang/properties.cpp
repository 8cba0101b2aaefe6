#include "multilang/properties.h"

#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>

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

}  // namespace

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

Result<MultiLangSettings> settings_from_properties(const std::map<std::string, std::string>& p) {
  MultiLangSettings s;
  std::vector<std::string> problems;
  auto get = [&](const char* key) -> const std::string* {
    auto it = p.find(key);
    return it == p.end() || it->second.empty() ? nullptr : &it->second;
  };
  auto number = [&](const char* key, long long lo, long long hi,
                    const char* unit = "") -> std::optional<long long> {
    const std::string* v = get(key);
    if (!v) return std::nullopt;
    char* end = nullptr;
    const long long n = std::strtoll(v->c_str(), &end, 10);
    if (*end != '\0' || n < lo || n > hi) {
      problems.push_back(std::string(key) + " = '" + *v + "' is not a number between " +
                         std::to_string(lo) + " and " + std::to_string(hi) + unit);
      return std::nullopt;
    }
    return n;
  };
  // true / false in any case, as Java's Boolean.parseBoolean reads them, except that
  // anything else is an error here instead of a silent false.
  auto boolean = [&](const char* key) -> std::optional<bool> {
    const std::string* v = get(key);
    if (!v) return std::nullopt;
    const std::string lower = lowercase(*v);
    if (lower == "true") return true;
    if (lower == "false") return false;
    problems.push_back(std::string(key) + " = '" + *v +
                       "' is not a boolean: use true or false (any case)");
    return std::nullopt;
  };
  using std::chrono::milliseconds;
  for (const char* key : {"executableName", "applicationName"}) {
    if (!get(key)) problems.push_back(std::string(key) + " is required");
  }
  if (!get("streamName") && !get("streamArn"))
    problems.emplace_back("streamName (or streamArn) is required");
  if (auto v = get("executableName")) s.child.command = split_command(*v);
  if (auto v = get("streamName")) s.worker.stream_name = *v;
  if (auto v = get("streamArn")) {
    // arn:aws:kinesis:REGION:ACCOUNT:stream/NAME
    const std::size_t at = v->find(":stream/");
    if (at == std::string::npos) {
      problems.push_back("streamArn = '" + *v + "' is not a Kinesis stream ARN");
    } else {
      s.worker.stream_name = v->substr(at + 8);
      const std::size_t r = std::string("arn:aws:kinesis:").size();
      if (v->rfind("arn:", 0) == 0 && s.worker.aws.region.empty()) {
        const std::size_t colon = v->find(':', r);
        if (colon != std::string::npos && colon > r) s.worker.aws.region = v->substr(r, colon - r);
      }
    }
  }
  if (auto v = get("tableName")) s.worker.leases.table_name = *v;
  if (auto v = get("applicationName")) s.worker.leases.application_name = *v;
  if (auto v = get("workerId")) s.worker.leases.worker_id = *v;
  if (auto v = get("regionName")) s.worker.aws.region = *v;
  if (auto v = get("kinesisEndpoint")) s.worker.aws.kinesis_endpoint_url = *v;
  if (auto v = get("dynamoDBEndpoint")) s.worker.aws.dynamodb_endpoint_url = *v;
  if (auto v = get("initialPositionInStream")) {
    if (*v == "TRIM_HORIZON") {
      s.worker.initial_position = InitialPosition::trim_horizon();
    } else if (*v == "LATEST") {
      s.worker.initial_position = InitialPosition::latest();
    } else if (*v == "AT_TIMESTAMP") {
      // Epoch seconds, as the Java daemon reads it (it multiplies by 1000). The upper bound
      // (year 9999) keeps a value written in milliseconds by mistake from being accepted.
      if (auto secs =
              number("initialPositionInStreamExtended", 0, kMaxEpochSeconds, " (epoch seconds)")) {
        s.worker.initial_position = InitialPosition::at_timestamp(
            std::chrono::system_clock::time_point(std::chrono::seconds(*secs)));
      } else if (!get("initialPositionInStreamExtended")) {
        problems.emplace_back(
            "initialPositionInStream = AT_TIMESTAMP needs initialPositionInStreamExtended "
            "(epoch seconds, e.g. 1700000000)");
      }
    } else {
      problems.push_back("initialPositionInStream = '" + *v +
                         "' is not TRIM_HORIZON, LATEST or AT_TIMESTAMP");
    }
  }
  if (auto n = number("failoverTimeMillis", 100, 3600000)) {
    s.worker.leases.failover_time = milliseconds(*n);
  }
  if (auto n = number("maxRecords", 1, 10000)) {
    s.worker.retrieval.max_records_per_call = static_cast<int>(*n);
  }
  if (auto n = number("idleTimeBetweenReadsInMillis", 0, 600000)) {
    s.worker.retrieval.idle_time_between_calls = milliseconds(*n);
  }
  if (auto n = number("shardSyncIntervalMillis", 100, 3600000)) {
    s.worker.processing.shard_sync_interval = milliseconds(*n);
  }
  if (auto n = number("parentShardPollIntervalMillis", 10, 60000)) {
    s.worker.processing.parent_check_interval = milliseconds(*n);
  }
  if (auto n = number("maxLeasesForWorker", 1, 1000000)) {
    s.worker.leases.max_leases_per_worker = static_cast<int>(*n);
  }
  if (auto n = number("maxLeasesToStealAtOneTime", 1, 1000)) {
    s.worker.leases.max_leases_to_steal_at_once = static_cast<int>(*n);
  }
  if (auto n = number("initialLeaseTableReadCapacity", 1, 100000)) {
    s.worker.leases.read_capacity_units = *n;
  }
  if (auto n = number("initialLeaseTableWriteCapacity", 1, 100000)) {
    s.worker.leases.write_capacity_units = *n;
  }
  if (auto n = number("timeoutInSeconds", 1, 3600)) {
    s.child.response_timeout = std::chrono::seconds(*n);
  }
  if (auto n = number("shutdownGraceMillis", 1000, 3600000)) {
    s.worker.processing.shutdown_timeout = milliseconds(*n);
  }
  if (auto n = number("maxActiveThreads", 1, 256)) {
    s.worker.processing.thread_pool_size = static_cast<int>(*n);
  }
  if (auto v = get("retrievalMode")) {
    if (*v == "FANOUT") {
      s.worker.retrieval.mode = RetrievalMode::kFanOut;
    } else if (*v != "POLLING") {
      problems.push_back("retrievalMode = '" + *v + "' is not FANOUT or POLLING");
    }
  }
  if (auto v = get("consumerName")) s.worker.retrieval.consumer_name = *v;
  if (boolean("callProcessRecordsEvenForEmptyRecordList").value_or(false)) {
    s.warnings.emplace_back(
        "callProcessRecordsEvenForEmptyRecordList = true is not supported: kcl-cpp sends "
        "processRecords only with records, so a child that flushes on an empty batch must "
        "flush on its next records or at shutdownRequested instead");
  }
  if (!boolean("cleanupLeasesUponShardCompletion").value_or(true)) {
    s.warnings.emplace_back(
        "cleanupLeasesUponShardCompletion = false is not supported: kcl-cpp always removes "
        "the lease of a finished shard once its children have started");
  }
  for (const char* key : {"AwsCredentialsProvider", "AWSCredentialsProvider",
                          "AwsCredentialsProviderDynamoDB", "AwsCredentialsProviderCloudWatch"}) {
    if (auto v = get(key)) read_credentials_provider(key, *v, s);
  }
  static const std::set<std::string> known = {
      "executableName", "streamName", "applicationName", "workerId", "regionName",
      "kinesisEndpoint", "dynamoDBEndpoint", "initialPositionInStream",
      "initialPositionInStreamExtended", "failoverTimeMillis", "maxRecords",
      "idleTimeBetweenReadsInMillis", "shardSyncIntervalMillis", "parentShardPollIntervalMillis",
      "maxLeasesForWorker", "maxLeasesToStealAtOneTime", "initialLeaseTableReadCapacity",
      "initialLeaseTableWriteCapacity", "timeoutInSeconds", "maxActiveThreads", "retrievalMode",
      "consumerName", "streamArn", "tableName", "shutdownGraceMillis",
      // What kcl-cpp always does: the standard
      // credentials chain, processRecords only with
      // records, leases of finished shards cleaned
      // up by shard sync.
      "AWSCredentialsProvider", "AwsCredentialsProvider", "AwsCredentialsProviderDynamoDB",
      "AwsCredentialsProviderCloudWatch", "processingLanguage",
      "callProcessRecordsEvenForEmptyRecordList", "cleanupLeasesUponShardCompletion"};
  for (const auto& [key, value] : p) {
    if (!known.count(key)) s.ignored_keys.push_back(key);
  }
  if (!problems.empty()) {
    std::string message = "the properties file has problems:";
    for (const auto& pr : problems) message += "\n  - " + pr;
    return Status(StatusCode::kInvalidArgument, message);
  }
  return s;
}

}  // namespace kcl::multilang
