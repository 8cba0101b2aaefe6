// bench_put_records_call: what one PutRecords call of 500 records costs kcl-cpp's client on the
// CPU, the network left out: KinesisClient::put_records over an in-process transport that
// answers every call with the same 500 results (as kinesalite writes them), so the time is
// the client's own work per call: the body taken, its SHA-256, SigV4, the headers, the
// answer copied as a transport would and parsed into per-record results.
//
//   BM_Sha256Body    the SHA-256 of the same body (SigV4 hashes it once a call): the
//                    baseline, the part of a call that grows with the bytes and stays
//   BM_BuildRequest  the body written record by record (PutRecordsRequest::add), as the
//                    producer does before each call
//   BM_Call          put_records on a body built beforehand (outside the timing)
//
// Arguments: the record size (10, 100 and 1000 B). Per call times are printed per benchmark
// (Time column); items are records.
//
//   build/release/bench/bench_put_records_call [--benchmark_min_time=0.5]
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "aws/aws_json_client.h"
#include "aws/credentials.h"
#include "aws/http_transport.h"
#include "base/digest.h"
#include "kinesis/kinesis_client.h"
#include "kinesis/put_records_request.h"

namespace {

constexpr std::size_t kCallRecords = 500;

std::string record_data(std::size_t size, std::size_t i) {
  std::string s = std::to_string(1000000 + i) + ' ';
  while (s.size() < size) s += static_cast<char>('a' + (s.size() * 7 + i) % 26);
  s.resize(size);
  return s;
}

kcl::kinesis::PutRecordsRequest build(std::size_t size) {
  kcl::kinesis::PutRecordsRequest req("bench-stream");
  req.keep_positions(false);  // as kcl put asks
  req.reserve(kCallRecords, kCallRecords * (size + 4));
  for (std::size_t i = 0; i < kCallRecords; ++i) {
    req.add(record_data(size, i), std::to_string(i + 1));
  }
  return req;
}

// The answer kinesalite gives a call of 500 records spread over 4 shards.
std::string answer() {
  std::string a = R"({"FailedRecordCount":0,"Records":[)";
  for (std::size_t i = 0; i < kCallRecords; ++i) {
    if (i > 0) a += ',';
    a += R"({"ShardId":"shardId-00000000000)" + std::to_string(i % 4) +
         R"(","SequenceNumber":"4966021765773084066498215826700328136)" +
         std::to_string(1000000000000000000ULL + i) + "\"}";
  }
  a += "]}";
  return a;
}

// Answers every request with `answer` (copied into a fresh body, as libcurl's write callback
// fills one) and the headers kinesalite sends.
class AnsweringTransport final : public kcl::aws::HttpTransport {
 public:
  explicit AnsweringTransport(std::string answer) : answer_(std::move(answer)) {}
  kcl::Result<kcl::aws::HttpResponse> send(const kcl::aws::HttpRequest& request) override {
    benchmark::DoNotOptimize(request.body.data());
    kcl::aws::HttpResponse r;
    r.status = 200;
    r.headers = {{"x-amzn-requestid", "0b3e5c1a-9f2e-11ef-8a3c-2b1f6c3d4e5f"},
                 {"x-amz-id-2", "k3Fz8mQ1"},
                 {"content-type", "application/x-amz-json-1.1"},
                 {"content-length", std::to_string(answer_.size())},
                 {"date", "Sun, 29 Nov 2026 10:00:00 GMT"},
                 {"connection", "keep-alive"}};
    r.body = kcl::aws::response_body_recycler().take(answer_.size() +
                                                     kcl::aws::HttpResponse::kBodySlack);
    r.body.append(answer_);
    return r;
  }

 private:
  std::string answer_;
};

kcl::kinesis::KinesisClient make_client() {
  kcl::AwsConfig config;
  config.region = "us-east-1";
  config.kinesis_endpoint_url = "http://127.0.0.1:4567";
  auto creds = kcl::aws::make_static_provider(
      kcl::StaticCredentials{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""});
  std::shared_ptr<kcl::aws::AwsJsonClient> raw = kcl::aws::make_aws_json_client(
      kcl::aws::kinesis_service(), config, std::make_shared<AnsweringTransport>(answer()),
      std::move(creds));
  return kcl::kinesis::KinesisClient(std::move(raw));
}

void set_rate(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kCallRecords));
}

void BM_Sha256Body(benchmark::State& state) {
  const std::string body = build(static_cast<std::size_t>(state.range(0))).take_body();
  kcl::base::Sha256Digest md{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(kcl::base::sha256(body, md));
    benchmark::DoNotOptimize(md.data());
  }
  state.counters["body_bytes"] = static_cast<double>(body.size());
  set_rate(state);
}
BENCHMARK(BM_Sha256Body)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_BuildRequest(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  std::vector<std::string> data;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < kCallRecords; ++i) {
    data.push_back(record_data(size, i));
    keys.push_back(std::to_string(i + 1));
  }
  for (auto _ : state) {
    kcl::kinesis::PutRecordsRequest req("bench-stream");
    req.reserve(kCallRecords, kCallRecords * (size + 4));
    for (std::size_t i = 0; i < kCallRecords; ++i) req.add(data[i], keys[i]);
    std::string body = std::move(req).take_body();
    benchmark::DoNotOptimize(body.data());
  }
  set_rate(state);
}
BENCHMARK(BM_BuildRequest)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

void BM_Call(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  kcl::kinesis::KinesisClient client = make_client();
  for (auto _ : state) {
    state.PauseTiming();
    kcl::kinesis::PutRecordsRequest req = build(size);  // reserved as the producer does
    state.ResumeTiming();
    auto r = client.put_records(std::move(req), kcl::aws::CallOptions{});
    if (!r.ok() || r->records.size() != kCallRecords || r->failed_record_count != 0) {
      state.SkipWithError(r.ok() ? "wrong answer" : r.status().to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(r->records.data());
  }
  set_rate(state);
}
BENCHMARK(BM_Call)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
