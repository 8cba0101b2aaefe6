// resolve_endpoint: region and endpoint of a service, as the AWS SDKs find them.
//
// Region: AwsConfig.region, AWS_REGION, AWS_DEFAULT_REGION, then `region` of the profile
// (AwsConfig.profile, AWS_PROFILE, "default") in the shared config file (AWS_CONFIG_FILE or
// ~/.aws/config; read with the shared-file parser of ini_file.h).
// Endpoint: the per-service AwsConfig field, AWS_ENDPOINT_URL_<SERVICE>, AwsConfig.endpoint_url,
// AWS_ENDPOINT_URL, else https://<service>.<region>.amazonaws.com(.cn for cn- regions).
// With an endpoint override and no region, "us-east-1" is used for signing (emulators do not
// care). Empty environment variables count as unset.
#include <string>
#include <string_view>

#include "aws/aws_json_client.h"
#include "aws/ini_file.h"
#include "aws/text.h"
#include "base/status_macros.h"

namespace kcl::aws {
namespace {

// For messages: printable ASCII only, bounded.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) {
    auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u >= 0x7f) ? '?' : c;
  }
  if (s.size() > 200) out += "...";
  return out;
}

bool valid_region(std::string_view r) {
  if (r.empty() || r.size() > 64 || r.front() == '-' || r.back() == '-') return false;
  for (char c : r) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool valid_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

// The URL for messages, with any user info (a password, perhaps) left out.
std::string shown_url(std::string_view raw) {
  std::size_t sep = raw.find("://");
  std::size_t start = sep == std::string_view::npos ? 0 : sep + 3;
  std::size_t end = raw.find_first_of("/?#", start);
  std::size_t at =
      raw.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start)
          .rfind('@');
  if (at == std::string_view::npos) return printable(raw);
  return printable(std::string(raw.substr(0, start)) + "[user info hidden]" +
                   std::string(raw.substr(start + at)));
}

// Each *_problem function below says what is wrong with a part of an endpoint URL, in a
// phrase for normalize_endpoint's message; empty when nothing is.

// [IPv6]:port: the address and the port's text.
std::string_view ipv6_authority_problem(std::string_view authority, std::string_view& port) {
  std::size_t close = authority.find(']');
  if (close == std::string_view::npos) return "unclosed IPv6 address";
  for (char c : authority.substr(1, close - 1)) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
              c == ':' || c == '.';
    if (!ok) return "bad IPv6 address";
  }
  std::string_view after = authority.substr(close + 1);
  if (after.empty()) return {};
  if (after.front() != ':') return "bad port";
  port = after.substr(1);
  if (port.empty()) return "empty port";
  return {};
}

// host[:port]: the host name and the port's text.
std::string_view named_authority_problem(std::string_view authority, std::string_view& port) {
  std::string_view host = authority;
  std::size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) return "empty port";
  }
  if (host.empty()) return "no host";
  for (char c : host) {
    if (!valid_host_char(c)) return "the host name has a character not allowed";
  }
  return {};
}

std::string_view port_problem(std::string_view port) {
  if (port.empty()) return {};
  if (port.size() > 5) return "the port must be 1..65535";
  int p = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return "the port must be a number";
    p = p * 10 + (c - '0');
  }
  if (p < 1 || p > 65535) return "the port must be 1..65535";
  return {};
}

std::string_view authority_problem(std::string_view authority) {
  if (authority.empty()) return "no host";
  if (authority.find('@') != std::string_view::npos) return "user info is not allowed";
  std::string_view port;
  const std::string_view problem = authority.front() == '['
                                       ? ipv6_authority_problem(authority, port)
                                       : named_authority_problem(authority, port);
  return problem.empty() ? port_problem(port) : problem;
}

std::string_view path_problem(std::string_view path) {
  for (char c : path) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return "the path has a space or a character not allowed";
  }
  return {};
}

// Splits http(s)://authority[/path] into lower-case scheme, authority and path.
std::string_view split_problem(std::string_view url, std::string& scheme,
                               std::string_view& authority, std::string_view& path) {
  std::size_t sep = url.find("://");
  if (sep == std::string_view::npos) return "no scheme";
  scheme = to_lower(url.substr(0, sep));
  if (scheme != "http" && scheme != "https") return "the scheme must be http or https";
  std::string_view rest = url.substr(sep + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return "an endpoint has no query or fragment";
  }
  std::size_t slash = rest.find('/');
  authority = rest.substr(0, slash);
  path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  return {};
}

// Validates an endpoint URL and returns it as scheme://host[:port][/path] without a trailing
// slash.
Result<std::string> normalize_endpoint(std::string_view raw, std::string_view source) {
  std::string scheme;
  std::string_view authority;
  std::string_view path;
  std::string_view problem = split_problem(trim(raw), scheme, authority, path);
  if (problem.empty()) problem = authority_problem(authority);
  if (problem.empty()) problem = path_problem(path);
  if (!problem.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "bad endpoint URL '" + shown_url(raw) + "' (from " + std::string(source) +
                      "): " + std::string(problem) +
                      "; expected http(s)://host[:port], e.g. http://localhost:4567");
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  std::string out = scheme + "://";
  out += authority;
  out += path;
  return out;
}

std::string service_env_suffix(std::string_view service) {
  std::string out;
  for (char c : service) {
    if (c == ' ' || c == '-') {
      out += '_';
    } else if (c >= 'a' && c <= 'z') {
      out += static_cast<char>(c - 'a' + 'A');
    } else {
      out += c;
    }
  }
  return out;
}

// A setting found, and where it came from (for messages).
struct Found {
  std::string value;
  std::string source;
};

// The region, from the first place that sets one. `profile_desc` names the profile
// consulted, when it came to that.
Found find_region(const AwsConfig& config, const EnvLookup& env, std::string& profile_desc) {
  if (!trim(config.region).empty()) {
    return {std::string(trim(config.region)), "the configured region"};
  }
  if (auto r = env_value(env, "AWS_REGION")) return {std::string(trim(*r)), "AWS_REGION"};
  if (auto r = env_value(env, "AWS_DEFAULT_REGION")) {
    return {std::string(trim(*r)), "AWS_DEFAULT_REGION"};
  }
  std::string name_source;
  std::string profile = resolve_profile_name(config.profile, env, &name_source);
  SharedProfile p = load_shared_profile(profile, env);
  profile_desc = "profile '" + printable(profile) + "' in " + printable(shared_config_path(env));
  if (auto r = p.get("region")) return {std::string(trim(*r)), "the region of " + profile_desc};
  return {};
}

// The endpoint override, from the first place that sets one; empty when there is none.
Found find_endpoint(const AwsConfig& config, const EnvLookup& env, std::string_view service,
                    const std::string& svc) {
  const std::string* per_service = nullptr;
  if (svc == "kinesis") per_service = &config.kinesis_endpoint_url;
  if (svc == "dynamodb") per_service = &config.dynamodb_endpoint_url;
  if (svc == "monitoring") per_service = &config.cloudwatch_endpoint_url;
  // The SDKs name the variable after the service id ("CloudWatch"), not its signing name.
  const std::string env_name =
      "AWS_ENDPOINT_URL_" +
      (svc == "monitoring" ? std::string("CLOUDWATCH") : service_env_suffix(service));
  if (per_service != nullptr && !trim(*per_service).empty()) {
    return {*per_service, "the configured " + svc + " endpoint"};
  }
  if (auto e = env_value(env, env_name)) return {*e, env_name};
  if (!trim(config.endpoint_url).empty()) return {config.endpoint_url, "the configured endpoint"};
  if (auto e = env_value(env, "AWS_ENDPOINT_URL")) return {*e, "AWS_ENDPOINT_URL"};
  return {};
}

// The region to sign with: the one found, else us-east-1 when an endpoint is set (emulators
// do not care).
Result<std::string> signing_region(const Found& region, const Found& endpoint,
                                   const std::string& profile_desc) {
  if (region.value.empty()) {
    if (endpoint.value.empty()) {
      std::string msg = "no region: set --region, AWS_REGION or AWS_DEFAULT_REGION";
      msg += profile_desc.empty() ? std::string(", or a region in ~/.aws/config")
                                  : ", or a region in the " + profile_desc;
      msg += " (or an endpoint URL for a local emulator)";
      return Status(StatusCode::kInvalidArgument, msg);
    }
    return std::string("us-east-1");
  }
  if (!valid_region(region.value)) {
    return Status(StatusCode::kInvalidArgument,
                  "unknown region '" + printable(region.value) + "' (from " + region.source +
                      "): a region is letters, digits and dashes, e.g. us-east-1");
  }
  return region.value;
}

// The SDKs' FIPS setting: AWS_USE_FIPS_ENDPOINT, else the profile's use_fips_endpoint.
Result<bool> find_fips(const AwsConfig& config, const EnvLookup& env) {
  Found f;
  if (auto v = env_value(env, "AWS_USE_FIPS_ENDPOINT")) {
    f = {std::string(trim(*v)), "AWS_USE_FIPS_ENDPOINT"};
  } else {
    const std::string profile = resolve_profile_name(config.profile, env);
    if (auto p = load_shared_profile(profile, env).get("use_fips_endpoint")) {
      f = {std::string(trim(*p)), "use_fips_endpoint of profile '" + printable(profile) + "'"};
    }
  }
  const std::string value = to_lower(f.value);
  if (value.empty() || value == "false") return false;
  if (value == "true") return true;
  return Status(StatusCode::kInvalidArgument,
                f.source + " is '" + printable(f.value) + "': true or false");
}

// The regions where every service kcl-cpp calls (Kinesis, DynamoDB, CloudWatch) has a FIPS
// endpoint named <service>-fips.<region>.amazonaws.com. Elsewhere (GovCloud, whose endpoints
// follow rules of their own per service, and regions without FIPS endpoints) a FIPS
// endpoint is named by the user rather than guessed.
bool has_fips_endpoints(std::string_view region) {
  return region == "us-east-1" || region == "us-east-2" || region == "us-west-1" ||
         region == "us-west-2";
}

// https://<service>.<region>.amazonaws.com, .cn for the cn- regions; with `fips`,
// https://<service>-fips.<region>.amazonaws.com.
Result<std::string> default_endpoint(const std::string& svc, const std::string& region, bool fips) {
  if (svc.empty()) {
    return Status(StatusCode::kInvalidArgument, "no service name to build an endpoint from");
  }
  for (char c : svc) {
    if (!valid_host_char(c)) {
      return Status(StatusCode::kInvalidArgument,
                    "bad service name '" + printable(svc) + "' for an endpoint");
    }
  }
  std::string lower_region = to_lower(region);
  if (fips) {
    if (!has_fips_endpoints(lower_region)) {
      return Status(StatusCode::kInvalidArgument,
                    "FIPS endpoints are asked for (AWS_USE_FIPS_ENDPOINT or use_fips_endpoint), "
                    "but kcl-cpp knows none of " +
                        svc + " in " + printable(region) + ": name it with " +
                        (svc == "monitoring" ? std::string("AWS_ENDPOINT_URL_CLOUDWATCH")
                                             : "AWS_ENDPOINT_URL_" + service_env_suffix(svc)) +
                        " or --endpoint-url");
    }
    return "https://" + svc + "-fips." + lower_region + ".amazonaws.com";
  }
  std::string url = "https://" + svc + "." + lower_region + ".amazonaws.com";
  if (lower_region.rfind("cn-", 0) == 0) url += ".cn";
  return url;
}

}  // namespace

Result<ResolvedEndpoint> resolve_endpoint(const AwsConfig& config, std::string_view service) {
  const EnvLookup env = process_env();
  const std::string svc = to_lower(service);
  std::string profile_desc;
  const Found region = find_region(config, env, profile_desc);
  const Found endpoint = find_endpoint(config, env, service, svc);
  ResolvedEndpoint out;
  KCL_ASSIGN_OR_RETURN(out.region, signing_region(region, endpoint, profile_desc));
  if (!endpoint.value.empty()) {
    KCL_ASSIGN_OR_RETURN(out.url, normalize_endpoint(endpoint.value, endpoint.source));
  } else {
    KCL_ASSIGN_OR_RETURN(const bool fips, find_fips(config, env));
    KCL_ASSIGN_OR_RETURN(out.url, default_endpoint(svc, out.region, fips));
  }
  return out;
}

}  // namespace kcl::aws
