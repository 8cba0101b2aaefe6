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

// Validates an endpoint URL and returns it as scheme://host[:port][/path] without a trailing
// slash.
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

Result<std::string> normalize_endpoint(std::string_view raw, std::string_view source) {
  const std::string shown = shown_url(raw);
  auto bad = [&](std::string_view why) {
    return Status(StatusCode::kInvalidArgument,
                  "bad endpoint URL '" + shown + "' (from " + std::string(source) +
                      "): " + std::string(why) +
                      "; expected http(s)://host[:port], e.g. http://localhost:4567");
  };
  std::string_view url = trim(raw);
  std::size_t sep = url.find("://");
  if (sep == std::string_view::npos) return bad("no scheme");
  std::string scheme = to_lower(url.substr(0, sep));
  if (scheme != "http" && scheme != "https") return bad("the scheme must be http or https");
  std::string_view rest = url.substr(sep + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return bad("an endpoint has no query or fragment");
  }
  std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.empty()) return bad("no host");
  if (authority.find('@') != std::string_view::npos) return bad("user info is not allowed");
  std::string_view host = authority;
  std::string_view port;
  if (authority.front() == '[') {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed IPv6 address");
    for (char c : authority.substr(1, close - 1)) {
      bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                c == ':' || c == '.';
      if (!ok) return bad("bad IPv6 address");
    }
    host = authority.substr(0, close + 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("bad port");
      port = after.substr(1);
      if (port.empty()) return bad("empty port");
    }
  } else {
    std::size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      if (port.empty()) return bad("empty port");
    }
    if (host.empty()) return bad("no host");
    for (char c : host) {
      if (!valid_host_char(c)) return bad("the host name has a character not allowed");
    }
  }
  if (!port.empty()) {
    if (port.size() > 5) return bad("the port must be 1..65535");
    int p = 0;
    for (char c : port) {
      if (c < '0' || c > '9') return bad("the port must be a number");
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535) return bad("the port must be 1..65535");
  }
  for (char c : path) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return bad("the path has a space or a character not allowed");
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

}  // namespace

Result<ResolvedEndpoint> resolve_endpoint(const AwsConfig& config, std::string_view service) {
  const EnvLookup env = process_env();
  const std::string svc = to_lower(service);

  // --- region ---
  std::string region;
  std::string region_source;
  std::string profile_desc;
  if (!trim(config.region).empty()) {
    region = std::string(trim(config.region));
    region_source = "the configured region";
  } else if (auto r = env_value(env, "AWS_REGION")) {
    region = std::string(trim(*r));
    region_source = "AWS_REGION";
  } else if (auto r2 = env_value(env, "AWS_DEFAULT_REGION")) {
    region = std::string(trim(*r2));
    region_source = "AWS_DEFAULT_REGION";
  } else {
    std::string name_source;
    std::string profile = resolve_profile_name(config.profile, env, &name_source);
    SharedProfile p = load_shared_profile(profile, env);
    profile_desc = "profile '" + printable(profile) + "' in " + printable(shared_config_path(env));
    if (auto r3 = p.get("region")) {
      region = std::string(trim(*r3));
      region_source = "the region of " + profile_desc;
    }
  }

  // --- endpoint ---
  std::string endpoint;
  std::string endpoint_source;
  const std::string* per_service = nullptr;
  if (svc == "kinesis") per_service = &config.kinesis_endpoint_url;
  if (svc == "dynamodb") per_service = &config.dynamodb_endpoint_url;
  if (svc == "monitoring") per_service = &config.cloudwatch_endpoint_url;
  // The SDKs name the variable after the service id ("CloudWatch"), not its signing name.
  const std::string env_name =
      "AWS_ENDPOINT_URL_" +
      (svc == "monitoring" ? std::string("CLOUDWATCH") : service_env_suffix(service));
  if (per_service != nullptr && !trim(*per_service).empty()) {
    endpoint = *per_service;
    endpoint_source = "the configured " + svc + " endpoint";
  } else if (auto e = env_value(env, env_name)) {
    endpoint = *e;
    endpoint_source = env_name;
  } else if (!trim(config.endpoint_url).empty()) {
    endpoint = config.endpoint_url;
    endpoint_source = "the configured endpoint";
  } else if (auto e2 = env_value(env, "AWS_ENDPOINT_URL")) {
    endpoint = *e2;
    endpoint_source = "AWS_ENDPOINT_URL";
  }

  if (region.empty()) {
    if (endpoint.empty()) {
      std::string msg = "no region: set --region, AWS_REGION or AWS_DEFAULT_REGION";
      msg += profile_desc.empty() ? std::string(", or a region in ~/.aws/config")
                                  : ", or a region in the " + profile_desc;
      msg += " (or an endpoint URL for a local emulator)";
      return Status(StatusCode::kInvalidArgument, msg);
    }
    region = "us-east-1";
  } else if (!valid_region(region)) {
    return Status(StatusCode::kInvalidArgument,
                  "unknown region '" + printable(region) + "' (from " + region_source +
                      "): a region is letters, digits and dashes, e.g. us-east-1");
  }

  ResolvedEndpoint out;
  out.region = region;
  if (!endpoint.empty()) {
    KCL_ASSIGN_OR_RETURN(out.url, normalize_endpoint(endpoint, endpoint_source));
    return out;
  }
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
  out.url = "https://" + svc + "." + lower_region + ".amazonaws.com";
  if (lower_region.rfind("cn-", 0) == 0) out.url += ".cn";
  return out;
}

}  // namespace kcl::aws
