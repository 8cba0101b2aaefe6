// bench_put_records_floor: what one PutRecords call costs below the producer, for
// bench/producer_e2e.py. Reads FILE as `kcl put` does (one record a line, the line number as
// its partition key), groups the lines into calls of 500 records and sends them one at a
// time to STREAM, pausing PAUSE_MS between calls (kcl put's pace: 4 shards at 1,000
// records/s take a call of 500 every 125 ms), in one of two ways:
//
//   client  kcl-cpp's Kinesis client: the JSON body with base64 (PutRecordsRequest, its
//           records added before the clock starts: the timed part is closing the body, SigV4
//           with the body's SHA-256, libcurl, the answer parsed into per-record results
//           (without their positions' strings, as kcl put asks for them));
//   curl    libcurl alone posting the same bodies, built before the clock starts, with fixed
//           headers and a dummy signature (the emulators do not check it; AWS would refuse
//           it): the cost of moving the bytes through libcurl and the kernel.
//
// Endpoint and credentials come from the environment (AWS_ENDPOINT_URL_KINESIS, ...). Prints
// one JSON line: mode, calls, records, the CPU of the sending thread in all and per call.
// Every call must succeed (all its records taken), else it exits 1 naming the call.
//
//   bench_put_records_floor client|curl STREAM FILE PAUSE_MS
#include <curl/curl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aws/aws_json_client.h"
#include "kinesis/kinesis_client.h"
#include "kinesis/put_records_request.h"

namespace {

constexpr std::size_t kCallRecords = 500;

double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

// The calls' bodies, kcl put's way: the line is the data, its number the partition key.
std::vector<kcl::kinesis::PutRecordsRequest> read_calls(const std::string& stream,
                                                        const std::string& path) {
  std::ifstream in(path);
  std::vector<kcl::kinesis::PutRecordsRequest> calls;
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    if (line_no % kCallRecords == 0) {
      calls.emplace_back(stream);
      calls.back().keep_positions(false);
    }
    ++line_no;
    calls.back().add(line, std::to_string(line_no));
  }
  return calls;
}

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// Posts `body` with libcurl on `h`; the HTTP status (0 when the transfer failed).
long post(CURL* h, const std::string& url, const std::string& body, std::string& answer) {
  curl_slist* headers = nullptr;
  for (const char* line :
       {"Content-Type: application/x-amz-json-1.1", "X-Amz-Target: Kinesis_20131202.PutRecords",
        "X-Amz-Date: 20260101T000000Z", "Expect:",
        "Authorization: AWS4-HMAC-SHA256 Credential=bench/20260101/us-east-1/kinesis/"
        "aws4_request, SignedHeaders=host;x-amz-date, Signature=0"}) {
    headers = curl_slist_append(headers, line);
  }
  answer.clear();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer);
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L << 10);  // kcl-cpp's default
  const CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  long status = 0;
  if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

int fail(const std::string& what) {
  std::fprintf(stderr, "bench_put_records_floor: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: bench_put_records_floor client|curl STREAM FILE PAUSE_MS\n");
    return 2;
  }
  const std::string mode = argv[1];
  const std::string stream = argv[2];
  const auto pause = std::chrono::milliseconds(std::atoi(argv[4]));
  if (mode != "client" && mode != "curl") return fail("mode must be client or curl");
  std::vector<kcl::kinesis::PutRecordsRequest> calls = read_calls(stream, argv[3]);
  if (calls.empty()) return fail(std::string("no records in ") + argv[3]);

  auto raw = kcl::aws::make_aws_json_client(kcl::aws::kinesis_service(), kcl::AwsConfig{});
  if (!raw.ok()) return fail(raw.status().to_string());
  const std::string url = (*raw)->endpoint();
  kcl::kinesis::KinesisClient client(std::shared_ptr<kcl::aws::AwsJsonClient>(std::move(*raw)));

  std::vector<std::size_t> sizes;  // records per call
  for (const auto& call : calls) sizes.push_back(call.records());
  std::vector<std::string> bodies;  // curl: built before the clock starts
  if (mode == "curl") {
    for (auto& call : calls) bodies.push_back(std::move(call).take_body());
  }
  CURL* h = curl_easy_init();
  std::string answer;
  std::size_t records = 0;
  double cpu_us = 0;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) std::this_thread::sleep_for(pause);
    const double start = thread_cpu_us();
    if (mode == "client") {
      auto r = client.put_records(std::move(calls[i]), kcl::aws::CallOptions{});
      cpu_us += thread_cpu_us() - start;
      if (!r.ok()) return fail("call " + std::to_string(i) + ": " + r.status().to_string());
      if (r->failed_record_count != 0) {
        return fail("call " + std::to_string(i) + ": " + std::to_string(r->failed_record_count) +
                    " records failed");
      }
    } else {
      const long status = post(h, url, bodies[i], answer);
      cpu_us += thread_cpu_us() - start;
      if (status != 200 || answer.find("\"FailedRecordCount\":0") == std::string::npos) {
        return fail("call " + std::to_string(i) + ": HTTP " + std::to_string(status) + " " +
                    answer.substr(0, 200));
      }
    }
    records += sizes[i];
  }
  curl_easy_cleanup(h);
  std::printf(
      "{\"mode\":\"%s\",\"calls\":%zu,\"records\":%zu,\"thread_cpu_ms\":%.1f,"
      "\"us_per_call\":%.1f}\n",
      mode.c_str(), calls.size(), records, cpu_us / 1e3,
      cpu_us / static_cast<double>(calls.size()));
  return 0;
}
