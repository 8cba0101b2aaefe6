#include "aws/json_util.h"

#include <nlohmann/json.hpp>

#include "aws/cbor.h"
#include "aws/text.h"

namespace kcl::aws {
namespace {

std::string string_field(const nlohmann::json& obj, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto it = obj.find(name);
    if (it != obj.end() && it->is_string()) return it->get<std::string>();
  }
  return {};
}

// From a body that is not valid JSON (cut short, say), the value of "__type" when its
// string is complete.
std::string salvage_type(std::string_view body) {
  std::size_t key = body.find("\"__type\"");
  if (key == std::string_view::npos) return {};
  std::size_t colon = body.find(':', key + 8);
  if (colon == std::string_view::npos) return {};
  std::size_t open = body.find('"', colon + 1);
  if (open == std::string_view::npos ||
      trim(body.substr(colon + 1, open - colon - 1)).size() != 0) {
    return {};
  }
  std::size_t close = body.find('"', open + 1);
  if (close == std::string_view::npos) return {};
  std::string_view v = body.substr(open + 1, close - open - 1);
  if (v.size() > 256 || v.find('\\') != std::string_view::npos) return {};
  return std::string(v);
}

// The text of the first <name>...</name> element (no nesting, entities left as they are);
// empty when absent.
std::string xml_element(std::string_view body, std::string_view name) {
  const std::string open = "<" + std::string(name) + ">";
  const std::string close = "</" + std::string(name) + ">";
  const std::size_t a = body.find(open);
  if (a == std::string_view::npos) return {};
  const std::size_t b = body.find(close, a + open.size());
  if (b == std::string_view::npos) return {};
  return std::string(body.substr(a + open.size(), std::min<std::size_t>(b - a - open.size(), 500)));
}

}  // namespace

std::string normalize_error_type(std::string_view raw) {
  raw = trim(raw);
  std::size_t colon = raw.find(':');
  if (colon != std::string_view::npos) raw = raw.substr(0, colon);
  std::size_t hash = raw.rfind('#');
  if (hash != std::string_view::npos) raw = raw.substr(hash + 1);
  // An error type is an identifier; anything else is not trusted into messages as is.
  std::string out;
  for (char c : trim(raw)) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    out += ok ? c : '?';
  }
  if (out.size() > 128) out.resize(128);
  return out;
}

std::string sanitize_snippet(std::string_view text, std::size_t max_chars) {
  std::string out;
  out.reserve(std::min(text.size(), max_chars) + 3);
  bool pending_space = false;
  bool cut = false;
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v') {
      pending_space = !out.empty();
      continue;
    }
    if (out.size() + (pending_space ? 2 : 1) > max_chars) {
      cut = true;
      break;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += (c < 0x20 || c >= 0x7f) ? '?' : ch;
  }
  if (cut) out += "...";
  return out;
}

namespace {
constexpr std::string_view kRedacted = "[redacted]";
}  // namespace

std::string redact_secrets(std::string text, std::span<const std::string_view> secrets) {
  for (std::string_view secret : secrets) {
    if (secret.size() < 4) continue;  // too short to be a secret: would mangle the text
    for (auto at = text.find(secret); at != std::string::npos;
         at = text.find(secret, at + kRedacted.size())) {
      text.replace(at, secret.size(), kRedacted);
    }
  }
  return text;
}

std::vector<std::string> request_secrets(const HttpRequest& request) {
  std::vector<std::string> secrets;
  for (const auto& [name, value] : request.headers) {
    if (iequals(name, "x-amz-security-token")) secrets.push_back(value);
    if (iequals(name, "authorization")) {
      static constexpr std::string_view kSignature = "Signature=";
      if (auto at = value.find(kSignature); at != std::string::npos) {
        secrets.push_back(value.substr(at + kSignature.size()));
      }
    }
  }
  return secrets;
}

namespace {
// The error of `response`; its message as the server wrote it (not cut), the snippet of a body
// that is not structured cut after `secrets` were taken out.
AwsErrorBody read_error(const HttpResponse& response, std::span<const std::string_view> secrets) {
  AwsErrorBody e;
  e.content_type = sanitize_snippet(response.header("content-type"), 80);
  std::string header_type = response.header("x-amzn-errortype");
  if (!header_type.empty()) e.type = normalize_error_type(header_type);

  std::string_view body = trim(response.body);
  if (body.empty()) {
    e.empty_body = true;
    return e;
  }
  if (e.content_type.find("cbor") != std::string::npos) {
    // The CBOR protocol's errors: {"__type": ..., "message": ...} in CBOR (not trimmed:
    // whitespace bytes are data there).
    std::string type, why;
    if (cbor::read_error_body(response.body, type, e.message, why)) {
      e.body_is_json = true;  // structured: type and message are known
      if (e.type.empty()) e.type = normalize_error_type(type);
    } else {
      e.body_is_json = false;
      e.snippet = "CBOR error body unreadable: " + why;
    }
    return e;
  }
  if (body.front() == '<') {
    // The query protocol's errors: <ErrorResponse><Error><Code>..</Code><Message>..</Message>.
    const std::string code = xml_element(body, "Code");
    if (!code.empty()) {
      e.body_is_json = true;  // structured: type and message are known
      if (e.type.empty()) e.type = normalize_error_type(code);
      e.message = xml_element(body, "Message");
      return e;
    }
  }
  nlohmann::json doc = nlohmann::json::parse(body.begin(), body.end(), nullptr,
                                             /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    e.body_is_json = false;
    e.snippet = sanitize_snippet(secrets.empty() ? std::string(body)
                                                 : redact_secrets(std::string(body), secrets));
    if (e.type.empty()) e.type = normalize_error_type(salvage_type(body));
    return e;
  }
  e.body_is_json = true;
  if (e.type.empty()) e.type = normalize_error_type(string_field(doc, {"__type", "code", "Code"}));
  e.message = string_field(doc, {"message", "Message", "errorMessage"});
  return e;
}
}  // namespace

AwsErrorBody parse_aws_error(const HttpResponse& response,
                             std::span<const std::string_view> secrets) {
  AwsErrorBody e = read_error(response, secrets);
  if (!secrets.empty()) e.message = redact_secrets(std::move(e.message), secrets);
  return e;
}

}  // namespace kcl::aws
