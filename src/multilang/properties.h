// multilang/properties.h: the Java MultiLangDaemon's properties file, read into a worker
// configuration, so existing files work unchanged.
//
// Keys used: executableName (required: the child's command line), streamName (required),
// applicationName (required), initialPositionInStream (TRIM_HORIZON, LATEST (default),
// AT_TIMESTAMP with initialPositionInStreamExtended = epoch seconds, as the Java daemon reads
// it), regionName,
// kinesisEndpoint, dynamoDBEndpoint, workerId, failoverTimeMillis, maxRecords,
// idleTimeBetweenReadsInMillis, shardSyncIntervalMillis, parentShardPollIntervalMillis,
// maxLeasesForWorker, maxLeasesToStealAtOneTime, initialLeaseTableReadCapacity,
// initialLeaseTableWriteCapacity, timeoutInSeconds (how long the child may take to send each
// message; unset, no limit, as the Java daemon), maxActiveThreads (threads running the shards'
// processors: 64 unset, 256 for the Java daemon's 0 or less, "no bound"), and the retrieval
// mode: retrievalMode = FANOUT | POLLING | DEFAULT (fan-out unless a polling key is set, as
// the Java daemon; unset: polling) with consumerName; choices in any case. Poison
// records (kcl-cpp's own keys): deadLetterFile = PATH or deadLetterStream = NAME turns on
// ProcessorErrorPolicy::kDeadLetter: a batch whose child fails (an error, a crash, no answer)
// maxAttemptsBeforeDeadLetter times (default 3) is bisected and each record that keeps
// failing goes to that JSON-lines file or stream (kcl/dead_letter.h).
// Understood but not configurable here: AwsCredentialsProvider (and AWSCredentialsProvider,
// AwsCredentialsProviderDynamoDB, AwsCredentialsProviderCloudWatch): the Java names of the
// default chain or its links (DefaultCredentialsProvider, DefaultAWSCredentialsProviderChain,
// EnvironmentVariableCredentialsProvider, ProfileCredentialsProvider[|profile], ...) mean
// the standard credentials chain; another value is a warning. callProcessRecordsEvenForEmpty-
// RecordList and cleanupLeasesUponShardCompletion must be true or false (any case); the
// values kcl-cpp cannot honour (true, false respectively) are a warning. Other keys kcl-cpp
// has no use for (processingLanguage, metricsLevel...) are listed once as ignored.
// kcl-cpp's own keys besides: every worker option by its name (kcl/worker_options.h, in the
// text form of `kcl consume --option`: `renew_interval = 2s`), applied after the Java keys.
// The Java keys of the worker's options, and their ranges, come from that table too.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kcl/status.h"
#include "kcl/worker.h"
#include "multilang/multilang_processor.h"

namespace kcl::multilang {

// key = value (or key: value) lines; # and ! start comments; a trailing backslash continues
// a line. Errors name the file and line.
Result<std::map<std::string, std::string>> parse_properties(const std::string& text,
                                                            const std::string& origin);

struct MultiLangSettings {
  WorkerConfig worker;
  ChildOptions child;
  // deadLetterFile / deadLetterStream: the sink for poison records (made by the caller).
  std::string dead_letter_file;
  std::string dead_letter_stream;
  std::vector<std::string> ignored_keys;  // present but without meaning for kcl-cpp
  // Settings understood but not honoured as asked, each in plain words (log each once).
  std::vector<std::string> warnings;
};

// Errors: kInvalidArgument listing every missing or malformed key.
Result<MultiLangSettings> settings_from_properties(const std::map<std::string, std::string>& p);

// The keys settings_from_properties reads besides the worker options' names: the Java
// daemon's (executableName, failoverTimeMillis, ...) and kcl-cpp's own (streamNames, ...).
std::vector<std::string> known_property_keys();

}  // namespace kcl::multilang
