// kcl/aws_config.h: how kcl-cpp reaches AWS (or a local emulator).
//
// Every field has a default that works against AWS with the standard environment
// (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL*, the credentials chain). Call validate()
// to get every problem in plain words.
//
// Thread safety: a plain value; copy freely.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kcl {

// Explicit static credentials; the first link of the credentials chain when set.
struct StaticCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty for long-term keys
};

// Retries in the manner of the AWS SDKs' "standard" mode.
struct RetryConfig {
  // Attempts per call including the first. Default 5, range 1..20.
  int max_attempts = 5;
  // Base of the capped exponential backoff (full jitter). Default 50 ms, range 1 ms..10 s.
  std::chrono::milliseconds base_delay{50};
  // Cap of one backoff sleep. Default 5 s, range base_delay..60 s.
  std::chrono::milliseconds max_backoff{5000};
  // Deadline of one call including all its retries. Default 60 s, range 1 s..15 min.
  std::chrono::milliseconds call_deadline{60000};
};

struct HttpConfig {
  // TCP connect timeout. Default 5 s, range 100 ms..60 s.
  std::chrono::milliseconds connect_timeout{5000};
  // Timeout of one HTTP request/response. Default 30 s, range 100 ms..10 min.
  std::chrono::milliseconds request_timeout{30000};
  // Verify the server's TLS certificate. Default true. Turn off only for local tests.
  bool verify_tls = true;
  // CA bundle file; empty = the system default.
  std::string ca_bundle;
  // Largest response body accepted. Default 64 MiB, range 1 MiB..1 GiB.
  std::size_t max_response_bytes = 64u << 20;
  // How much one read from a connection takes (libcurl's receive buffer, one per pooled
  // connection). Larger means fewer system calls for a large answer (a 2.5 MB GetRecords
  // answer is 160 reads at libcurl's default of 16 KiB, 10 at 256 KiB). Default 256 KiB,
  // range 16 KiB..512 KiB.
  std::size_t receive_buffer_bytes = 256u << 10;
  // Proxies come from HTTPS_PROXY / HTTP_PROXY / NO_PROXY (libcurl reads them).
};

// How the Kinesis data calls (GetRecords, PutRecord(s), SubscribeToShard) are encoded; the
// control-plane calls are JSON either way.
enum class KinesisWire {
  // CBOR on AWS endpoints (a host ending in .amazonaws.com or .amazonaws.com.cn), JSON
  // elsewhere (local emulators: kinesalite reads JSON only). The choice is logged once.
  kAuto,
  // CBOR (application/x-amz-cbor-1.1, what the AWS SDK for Java sends): record data travels
  // as raw bytes.
  kCbor,
  // AWS JSON 1.1: record data in base64.
  kJson,
};

struct AwsConfig {
  // Region, e.g. "us-east-1". Empty = AWS_REGION, AWS_DEFAULT_REGION, then the profile's
  // `region` in ~/.aws/config.
  std::string region;
  // Named profile of the shared files. Empty = AWS_PROFILE, then "default". A profile named
  // here is what the credentials come from: the chain does not read the environment's keys
  // ahead of it (as the AWS CLI's --profile and boto3's profile_name); AWS_PROFILE does not
  // skip them.
  std::string profile;
  // Endpoint override for all services. Empty = AWS_ENDPOINT_URL, else the AWS endpoint.
  std::string endpoint_url;
  // Per-service overrides. Empty = AWS_ENDPOINT_URL_KINESIS / AWS_ENDPOINT_URL_DYNAMODB /
  // AWS_ENDPOINT_URL_CLOUDWATCH, then endpoint_url.
  std::string kinesis_endpoint_url;
  std::string dynamodb_endpoint_url;
  std::string cloudwatch_endpoint_url;  // metrics publishing (PutMetricData)
  // Static credentials; when absent the default credentials chain is used.
  std::optional<StaticCredentials> credentials;
  RetryConfig retry;
  HttpConfig http;
  // The Kinesis data calls' encoding. Default kAuto.
  KinesisWire kinesis_wire = KinesisWire::kAuto;

  // Every problem with this configuration, in plain words; empty when valid.
  std::vector<std::string> validate() const;
};

}  // namespace kcl
