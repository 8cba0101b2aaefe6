// bench_request_signing: what signing one AWS request, and hashing one partition key, cost.
//
// Every AWS request kcl-cpp sends is signed (SigV4: a SHA-256 of the body, one of the
// canonical request, one of the secret for the key cache, and an HMAC), and the producer hashes
// every record's partition key with MD5 to find its shard. Each is measured twice: as OpenSSL 3
// is usually called (EVP_Digest(EVP_sha256()), HMAC(EVP_sha256()), which look the algorithm
// up by name on every call) and through base/digest.h (looked up once, a context per thread).
// The baseline is a memcpy of the same bytes in the same run; the summary prints each
// benchmark's time per call and its ratio to the lookup-per-call form.
//
//   build/release/bench/bench_request_signing [--benchmark_min_time=0.2]
#include <benchmark/benchmark.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "aws/sigv4.h"
#include "base/digest.h"
#include "producer/kpl_aggregator.h"
#include "summary_reporter.h"

namespace {

// A DynamoDB UpdateItem body of the size a checkpoint sends.
const std::string& body() {
  static const std::string b = [] {
    std::string s =
        R"({"TableName":"my-application","Key":{"leaseKey":{"S":"shardId-000000000003"}},)"
        R"("UpdateExpression":"SET #c = :c, #s = :s, #n = #n + :one",)"
        R"("ConditionExpression":"#o = :o AND #n = :n0","ExpressionAttributeNames":{"#c":)"
        R"("checkpoint","#s":"checkpointSubSequenceNumber","#n":"leaseCounter","#o":)"
        R"("leaseOwner"},"ExpressionAttributeValues":{":c":{"S":")";
    s += "49590338271490256608559692538361571095921575989136588898";
    s += R"("},":s":{"N":"0"},":one":{"N":"1"},":o":{"S":"host-1:4242:7f3a"},":n0":{"N":"17"}}})";
    return s;
  }();
  return b;
}

void set_rate(benchmark::State& state, std::size_t bytes) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(state.iterations());
}

void BM_MemcpyBaseline(benchmark::State& state) {
  const std::string& in = body();
  std::string out(in.size(), '\0');
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), in.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_rate(state, in.size());
}
BENCHMARK(BM_MemcpyBaseline);

// A digest as OpenSSL 3 is usually called: the algorithm looked up by name on every call.
void digest_looked_up_each_call(benchmark::State& state, const std::string& in,
                                const EVP_MD* (*algorithm)()) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  for (auto _ : state) {
    EVP_Digest(in.data(), in.size(), md, &len, algorithm(), nullptr);
    benchmark::DoNotOptimize(md);
  }
  set_rate(state, in.size());
}

void BM_Sha256LookedUpEachCall(benchmark::State& state) {
  digest_looked_up_each_call(state, body(), EVP_sha256);
}
BENCHMARK(BM_Sha256LookedUpEachCall);

void BM_Sha256(benchmark::State& state) {
  const std::string& in = body();
  kcl::base::Sha256Digest md{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(kcl::base::sha256(in, md));
    benchmark::DoNotOptimize(md.data());
  }
  set_rate(state, in.size());
}
BENCHMARK(BM_Sha256);

void BM_HmacLookedUpEachCall(benchmark::State& state) {
  const std::string& in = body();
  const std::string key(32, 'k');
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  for (auto _ : state) {
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
         reinterpret_cast<const unsigned char*>(in.data()), in.size(), md, &len);
    benchmark::DoNotOptimize(md);
  }
  set_rate(state, in.size());
}
BENCHMARK(BM_HmacLookedUpEachCall);

void BM_Hmac(benchmark::State& state) {
  const std::string& in = body();
  const std::string key(32, 'k');
  kcl::base::Sha256Digest md{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(kcl::base::hmac_sha256(key, in, md));
    benchmark::DoNotOptimize(md.data());
  }
  set_rate(state, in.size());
}
BENCHMARK(BM_Hmac);

// The whole of signing one request, with the signing key cached (as every request after a
// day's first).
void BM_SignRequest(benchmark::State& state) {
  kcl::aws::SigV4Signer signer;
  kcl::aws::SigningInput in;
  in.headers = {{"Host", "dynamodb.us-east-1.amazonaws.com"},
                {"Content-Type", "application/x-amz-json-1.0"},
                {"X-Amz-Target", "DynamoDB_20120810.UpdateItem"}};
  in.payload = body();
  in.region = "us-east-1";
  in.service = "dynamodb";
  in.credentials.access_key_id = "AKIDEXAMPLE";
  in.credentials.secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
  in.time = std::chrono::system_clock::now();
  for (auto _ : state) {
    kcl::aws::SigningResult r = signer.sign(in);
    benchmark::DoNotOptimize(r.signature.data());
  }
  set_rate(state, body().size());
}
BENCHMARK(BM_SignRequest);

void BM_PartitionKeyMd5LookedUpEachCall(benchmark::State& state) {
  digest_looked_up_each_call(state, "user-1234567", EVP_md5);
}
BENCHMARK(BM_PartitionKeyMd5LookedUpEachCall);

void BM_PartitionKeyHash(benchmark::State& state) {
  const std::string key = "user-1234567";
  for (auto _ : state) {
    benchmark::DoNotOptimize(kcl::producer::partition_key_hash(key));
  }
  set_rate(state, key.size());
}
BENCHMARK(BM_PartitionKeyHash);

}  // namespace

int main(int argc, char** argv) {
  const auto rates = kcl::bench::run_benchmarks(argc, argv, 5, [] {});
  if (!rates) return 1;
  const auto& r = *rates;
  auto ns_per_call = [&](const char* name) {
    auto it = r.find(name);
    return it != r.end() && it->second.second > 0 ? 1e9 / it->second.second : 0.0;
  };
  const double copy = ns_per_call("BM_MemcpyBaseline");
  std::printf("\nbody %zu bytes; memcpy of it (baseline) %.1f ns\n", body().size(), copy);
  const std::pair<const char*, const char*> pairs[] = {
      {"BM_Sha256", "BM_Sha256LookedUpEachCall"},
      {"BM_Hmac", "BM_HmacLookedUpEachCall"},
      {"BM_PartitionKeyHash", "BM_PartitionKeyMd5LookedUpEachCall"},
      {"BM_SignRequest", nullptr}};
  for (const auto& [name, before] : pairs) {
    const double t = ns_per_call(name);
    std::printf("%-22s %8.1f ns a call, %6.1fx memcpy", name, t, copy > 0 ? t / copy : 0.0);
    if (before != nullptr && ns_per_call(before) > 0) {
      std::printf(", %.2f of the lookup-per-call form (%.1f ns)", t / ns_per_call(before),
                  ns_per_call(before));
    }
    std::printf("\n");
  }
  return 0;
}
