// Parsers shared by the credentials providers: ISO 8601 times, a tolerant XML element
// extractor for STS responses, form encoding, and the JSON documents of credential_process,
// the container endpoint and IMDS. Messages never quote a document (it may hold secrets).
#include <cctype>
#include <charconv>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "aws/credentials_internal.h"
#include "aws/retry.h"

namespace kcl::aws::credentials_internal {
namespace {

bool parse_digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  out = v;
  return true;
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

void append_utf8(std::string& out, unsigned long cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x110000) {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes the five XML entities, numeric references and CDATA sections.
std::string xml_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, 9, "<![CDATA[") == 0) {
      std::size_t end = s.find("]]>", i + 9);
      if (end == std::string_view::npos) end = s.size();
      out.append(s.substr(i + 9, end - (i + 9)));
      i = end == s.size() ? end : end + 3;
      continue;
    }
    if (s[i] == '&') {
      std::size_t semi = s.find(';', i);
      if (semi != std::string_view::npos && semi - i <= 10) {
        std::string_view ent = s.substr(i + 1, semi - i - 1);
        bool done = true;
        if (ent == "amp")
          out += '&';
        else if (ent == "lt")
          out += '<';
        else if (ent == "gt")
          out += '>';
        else if (ent == "quot")
          out += '"';
        else if (ent == "apos")
          out += '\'';
        else if (ent.size() > 1 && ent[0] == '#') {
          unsigned long cp = 0;
          const bool hex = ent[1] == 'x' || ent[1] == 'X';
          std::string_view digits = ent.substr(hex ? 2 : 1);
          auto [p, ec] =
              std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
          if (ec == std::errc() && p == digits.data() + digits.size() && !digits.empty()) {
            append_utf8(out, cp);
          } else {
            done = false;
          }
        } else {
          done = false;
        }
        if (done) {
          i = semi + 1;
          continue;
        }
      }
    }
    out += s[i++];
  }
  return out;
}

std::optional<std::string> json_string(const nlohmann::json& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

StatusCode classify_sts_error(int http_status, std::string_view code) {
  if (is_throttling_error(code) || is_transient_error(code)) return StatusCode::kUnavailable;
  if (http_status >= 500 || http_status == 429) return StatusCode::kUnavailable;
  if (code == "ValidationError" || code == "MalformedPolicyDocument" ||
      code == "PackedPolicyTooLarge") {
    return StatusCode::kInvalidArgument;
  }
  return StatusCode::kPermissionDenied;
}

// "YYYY-MM-DDThh:mm:ss" (T, t or a space between date and time) at the start of `s`.
std::optional<std::chrono::sys_seconds> parse_date_time(std::string_view s) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!parse_digits(s, 0, 4, y) || s.size() < 19 || s[4] != '-' || !parse_digits(s, 5, 2, mo) ||
      s[7] != '-' || !parse_digits(s, 8, 2, d) || !(s[10] == 'T' || s[10] == 't' || s[10] == ' ') ||
      !parse_digits(s, 11, 2, h) || s[13] != ':' || !parse_digits(s, 14, 2, mi) || s[16] != ':' ||
      !parse_digits(s, 17, 2, sec)) {
    return std::nullopt;
  }
  if (h > 23 || mi > 59 || sec > 60) return std::nullopt;
  const std::chrono::year_month_day ymd{std::chrono::year{y},
                                        std::chrono::month{static_cast<unsigned>(mo)},
                                        std::chrono::day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) return std::nullopt;
  return std::chrono::sys_days{ymd} + std::chrono::hours(h) + std::chrono::minutes(mi) +
         std::chrono::seconds(sec);
}

// Fractional seconds (".123" or ",123") at s[pos], moving `pos` past them; zero when there
// are none, nullopt for a separator without digits.
std::optional<std::chrono::nanoseconds> parse_fraction(std::string_view s, std::size_t& pos) {
  if (pos >= s.size() || (s[pos] != '.' && s[pos] != ',')) return std::chrono::nanoseconds(0);
  ++pos;
  std::size_t start = pos;
  long long scale = 100000000;
  long long ns = 0;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
    ns += (s[pos] - '0') * scale;
    scale /= 10;
    ++pos;
  }
  if (pos == start) return std::nullopt;
  return std::chrono::nanoseconds(ns);
}

// The rest of the text after the time: nothing or Z (UTC), or +hh:mm, +hhmm or +hh (and -).
std::optional<std::chrono::minutes> parse_utc_offset(std::string_view rest) {
  if (rest.empty() || rest == "Z" || rest == "z") return std::chrono::minutes(0);
  if (rest[0] != '+' && rest[0] != '-') return std::nullopt;
  const int sign = rest[0] == '-' ? -1 : 1;
  rest.remove_prefix(1);
  int oh = 0, om = 0;
  const bool valid =
      (rest.size() == 5 && rest[2] == ':' && parse_digits(rest, 0, 2, oh) &&
       parse_digits(rest, 3, 2, om)) ||
      (rest.size() == 4 && parse_digits(rest, 0, 2, oh) && parse_digits(rest, 2, 2, om)) ||
      (rest.size() == 2 && parse_digits(rest, 0, 2, oh));
  if (!valid || oh > 23 || om > 59) return std::nullopt;
  return std::chrono::minutes(sign * (oh * 60 + om));
}

// system_clock counts nanoseconds in 64 bits (years 1677..2262): clamp what lies beyond.
std::chrono::system_clock::time_point to_system_clock(std::chrono::sys_seconds tp,
                                                      std::chrono::nanoseconds frac) {
  using Sys = std::chrono::system_clock;
  const auto max_s = std::chrono::time_point_cast<std::chrono::seconds>(Sys::time_point::max());
  const auto min_s = std::chrono::time_point_cast<std::chrono::seconds>(Sys::time_point::min());
  if (tp >= max_s) return Sys::time_point::max();
  if (tp <= min_s) return Sys::time_point::min();
  return std::chrono::time_point_cast<Sys::duration>(tp) +
         std::chrono::duration_cast<Sys::duration>(frac);
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_iso8601(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  const std::optional<std::chrono::sys_seconds> local = parse_date_time(s);
  if (!local) return std::nullopt;
  std::size_t pos = 19;
  const std::optional<std::chrono::nanoseconds> frac = parse_fraction(s, pos);
  if (!frac) return std::nullopt;
  const std::optional<std::chrono::minutes> offset = parse_utc_offset(s.substr(pos));
  if (!offset) return std::nullopt;
  return to_system_clock(*local - *offset, *frac);
}

std::optional<std::string> xml_element_text(std::string_view xml, std::string_view tag) {
  std::size_t pos = 0;
  while ((pos = xml.find('<', pos)) != std::string_view::npos) {
    std::size_t name_start = pos + 1;
    std::size_t name_end = name_start;
    while (name_end < xml.size() && !is_ws(xml[name_end]) && xml[name_end] != '>' &&
           xml[name_end] != '/') {
      ++name_end;
    }
    std::string_view qname = xml.substr(name_start, name_end - name_start);
    std::string_view local = qname;
    if (auto colon = qname.find(':'); colon != std::string_view::npos) {
      local = qname.substr(colon + 1);
    }
    pos = name_end;
    if (local != tag || qname.empty() || qname.front() == '/' || qname.front() == '!' ||
        qname.front() == '?') {
      continue;
    }
    std::size_t gt = xml.find('>', name_end);
    if (gt == std::string_view::npos) return std::nullopt;
    if (gt > 0 && xml[gt - 1] == '/') return std::string();  // <Tag/>
    std::size_t content_start = gt + 1;
    // The matching close tag; nested elements of the same name are not expected here.
    std::string close = "</" + std::string(qname);
    std::size_t end = content_start;
    while ((end = xml.find(close, end)) != std::string_view::npos) {
      std::size_t after = end + close.size();
      while (after < xml.size() && is_ws(xml[after])) ++after;
      if (after < xml.size() && xml[after] == '>') break;
      end = after;
    }
    if (end == std::string_view::npos) return std::nullopt;
    return xml_decode(xml.substr(content_start, end - content_start));
  }
  return std::nullopt;
}

std::string form_encode(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size() * 3 / 2);
  for (char ch : value) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

namespace {

// What a document of credentials calls its session token, and how its faults are reported.
struct CredentialsDocument {
  const char* token_key;
  StatusCode error_code;
  std::string prefix;          // names the source
  const char* no_keys;         // AccessKeyId or SecretAccessKey missing or empty
  const char* bad_expiration;  // Expiration not an ISO 8601 time
};

// The credentials in a document of credential_process, the container endpoint or IMDS:
// AccessKeyId and SecretAccessKey (non-empty strings), the session token, and an ISO 8601
// Expiration when present and not null.
Result<Credentials> credentials_from_json(const nlohmann::json& doc, const CredentialsDocument& d) {
  auto id = json_string(doc, "AccessKeyId");
  auto secret = json_string(doc, "SecretAccessKey");
  if (!id || id->empty() || !secret || secret->empty()) {
    return Status(d.error_code, d.prefix + d.no_keys);
  }
  Credentials c;
  c.access_key_id = std::move(*id);
  c.secret_access_key = std::move(*secret);
  if (auto token = json_string(doc, d.token_key)) c.session_token = std::move(*token);
  auto exp = doc.find("Expiration");
  if (exp != doc.end() && !exp->is_null()) {
    std::optional<std::chrono::system_clock::time_point> t;
    if (exp->is_string()) t = parse_iso8601(exp->get<std::string>());
    if (!t) return Status(d.error_code, d.prefix + d.bad_expiration);
    c.expiration = *t;
  }
  return c;
}

}  // namespace

Result<Credentials> parse_process_output(std::string_view json, std::string_view what) {
  auto doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  const std::string prefix = std::string(what) + " ";
  if (doc.is_discarded() || !doc.is_object()) {
    return Status(StatusCode::kPermissionDenied,
                  prefix + "printed output that is not a JSON object (" +
                      std::to_string(json.size()) +
                      " bytes); expected {\"Version\": 1, \"AccessKeyId\": ..., "
                      "\"SecretAccessKey\": ..., \"SessionToken\": ..., \"Expiration\": ...}");
  }
  auto version = doc.find("Version");
  if (version == doc.end() || !version->is_number_integer() || version->get<long long>() != 1) {
    return Status(StatusCode::kPermissionDenied,
                  prefix + "printed JSON without \"Version\": 1 (the only version supported)");
  }
  return credentials_from_json(
      doc, {"SessionToken", StatusCode::kPermissionDenied, prefix,
            "printed JSON without a string \"AccessKeyId\" and \"SecretAccessKey\"",
            "printed an \"Expiration\" that is not an ISO 8601 time"});
}

Result<Credentials> parse_metadata_credentials(std::string_view json, std::string_view what) {
  auto doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  const std::string prefix = std::string(what) + ": ";
  if (doc.is_discarded() || !doc.is_object()) {
    return Status(StatusCode::kInternal, prefix + "response is not a JSON object (" +
                                             std::to_string(json.size()) + " bytes)");
  }
  if (auto code = json_string(doc, "Code"); code && *code != "Success") {
    std::string msg = prefix + "credentials not available (Code " + *code;
    if (auto m = json_string(doc, "Message")) msg += ": " + *m;
    msg += ")";
    return Status(StatusCode::kPermissionDenied, msg);
  }
  return credentials_from_json(doc,
                               {"Token", StatusCode::kInternal, prefix,
                                "response has no string \"AccessKeyId\" and \"SecretAccessKey\"",
                                "response has an \"Expiration\" that is not an ISO 8601 time"});
}

Result<Credentials> parse_sts_response(const HttpResponse& response, std::string_view operation,
                                       std::string_view endpoint) {
  AwsErrorDetails details;
  details.operation = "STS." + std::string(operation);
  details.endpoint = std::string(endpoint);
  details.http_status = response.status;
  details.attempts = 1;
  details.request_id = response.header("x-amzn-requestid");
  if (details.request_id.empty()) {
    if (auto rid = xml_element_text(response.body, "RequestId")) details.request_id = *rid;
  }

  if (response.status == 200) {
    auto creds_xml = xml_element_text(response.body, "Credentials");
    if (!creds_xml) {
      return Status(StatusCode::kInternal,
                    "STS " + std::string(operation) + " response has no Credentials element",
                    details);
    }
    auto id = xml_element_text(*creds_xml, "AccessKeyId");
    auto secret = xml_element_text(*creds_xml, "SecretAccessKey");
    auto token = xml_element_text(*creds_xml, "SessionToken");
    auto exp = xml_element_text(*creds_xml, "Expiration");
    if (!id || id->empty() || !secret || secret->empty() || !token || token->empty()) {
      return Status(StatusCode::kInternal,
                    "STS " + std::string(operation) +
                        " response lacks AccessKeyId, SecretAccessKey or SessionToken",
                    details);
    }
    Credentials c;
    c.access_key_id = std::move(*id);
    c.secret_access_key = std::move(*secret);
    c.session_token = std::move(*token);
    if (exp) {
      auto t = parse_iso8601(*exp);
      if (!t) {
        return Status(StatusCode::kInternal,
                      "STS " + std::string(operation) +
                          " response has an Expiration that is not an ISO 8601 time",
                      details);
      }
      c.expiration = *t;
    }
    return c;
  }

  std::string code = xml_element_text(response.body, "Code").value_or("");
  std::string message = xml_element_text(response.body, "Message").value_or("");
  details.error_type = code;
  std::string text =
      "STS " + std::string(operation) + " failed with HTTP " + std::to_string(response.status);
  if (!code.empty()) text += " " + code;
  if (!message.empty()) text += ": " + message;
  return Status(classify_sts_error(response.status, code), text, details);
}

}  // namespace kcl::aws::credentials_internal
