// The static, environment and shared-files providers, including credential_process, against
// temporary files and an environment given as a map (the process environment is untouched).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "aws/credentials_internal.h"
#include "aws_test_util.h"

namespace kcl::aws::credentials_internal {
namespace {

namespace fs = std::filesystem;
using test::FakeEnv;
using test::TempDir;

using test::kSecretKey;
using test::kSessionToken;

void expect_no_profile_secrets(const Status& s) {
  const std::string text = s.to_string();
  EXPECT_EQ(text.find(kSecretKey), std::string::npos) << text;
  EXPECT_EQ(text.find(kSessionToken), std::string::npos) << text;
}

// ---- static and environment ----

TEST(CredentialsStaticTest, ReturnsWhatWasConfigured) {
  auto p = make_static_provider({"AKID", kSecretKey, kSessionToken});
  auto c = p->get();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->access_key_id, "AKID");
  EXPECT_EQ(c->secret_access_key, kSecretKey);
  EXPECT_EQ(c->session_token, kSessionToken);
  EXPECT_FALSE(c->expiration.has_value());

  auto empty = make_static_provider({"AKID", "", ""})->get();
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
}

TEST(CredentialsEnvTest, NotSetIsNotFound) {
  FakeEnv env;
  auto r = make_environment_provider(env.lookup())->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(CredentialsEnvTest, ReadsKeysTokenAndExpiration) {
  FakeEnv env;
  env.vars = {{"AWS_ACCESS_KEY_ID", "AKID"},
              {"AWS_SECRET_ACCESS_KEY", kSecretKey},
              {"AWS_SESSION_TOKEN", kSessionToken},
              {"AWS_CREDENTIAL_EXPIRATION", "2030-01-01T00:00:00Z"}};
  auto p = make_environment_provider(env.lookup());
  auto c = p->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "AKID");
  EXPECT_EQ(c->secret_access_key, kSecretKey);
  EXPECT_EQ(c->session_token, kSessionToken);
  EXPECT_TRUE(c->expiration.has_value());

  env.vars.erase("AWS_SESSION_TOKEN");
  env.vars.erase("AWS_CREDENTIAL_EXPIRATION");
  env.vars["AWS_ACCESS_KEY_ID"] = "AKID2";  // read at get() time
  c = p->get();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->access_key_id, "AKID2");
  EXPECT_TRUE(c->session_token.empty());
}

TEST(CredentialsEnvTest, HalfConfiguredIsAnErrorWithoutSecrets) {
  FakeEnv env;
  env.vars = {{"AWS_SECRET_ACCESS_KEY", kSecretKey}, {"AWS_SESSION_TOKEN", kSessionToken}};
  auto r = make_environment_provider(env.lookup())->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos);
  expect_no_profile_secrets(r.status());

  env.vars = {{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", ""}};  // empty = unset
  r = make_environment_provider(env.lookup())->get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AWS_SECRET_ACCESS_KEY is not"), std::string::npos);
}

// ---- shared files ----

class CredentialsProfileTest : public ::testing::Test {
 protected:
  CredentialsProfileTest() { env_.vars["HOME"] = dir_.path().string(); }
  std::shared_ptr<CredentialsProvider> provider(const std::string& profile = "",
                                                ProfileProviderOptions options = {}) {
    AwsConfig config;
    config.profile = profile;
    return make_profile_provider(config, env_.lookup(), nullptr, clock_, options);
  }
  void write_credentials(const std::string& text) { dir_.write(".aws/credentials", text); }
  void write_config(const std::string& text) { dir_.write(".aws/config", text); }

  TempDir dir_;
  FakeEnv env_;
  ManualClock clock_;
};

TEST_F(CredentialsProfileTest, DefaultProfileFromCredentialsFile) {
  write_credentials(std::string("[default]\naws_access_key_id = AKID\naws_secret_access_key = ") +
                    kSecretKey + "\naws_session_token = " + kSessionToken + "\n");
  auto p = provider();
  EXPECT_EQ(p->name(), "shared files (profile default)");
  auto c = p->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "AKID");
  EXPECT_EQ(c->secret_access_key, kSecretKey);
  EXPECT_EQ(c->session_token, kSessionToken);
}

TEST_F(CredentialsProfileTest, NoFilesIsNotFound) {
  auto r = provider()->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(".aws/credentials"), std::string::npos);
}

TEST_F(CredentialsProfileTest, ConfigFileUsesProfilePrefixAndDefault) {
  write_config(
      "[profile dev]\naws_access_key_id = DEVKEY\naws_secret_access_key = devsecret\n"
      "[dev]\naws_access_key_id = WRONG\naws_secret_access_key = wrong\n"
      "[default]\naws_access_key_id = DEFKEY\naws_secret_access_key = defsecret\n");
  auto dev = provider("dev")->get();
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_EQ(dev->access_key_id, "DEVKEY");
  auto def = provider()->get();
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->access_key_id, "DEFKEY");
}

TEST_F(CredentialsProfileTest, ProfileFromEnvAndConfigPrecedence) {
  write_credentials(
      "[envprof]\naws_access_key_id = ENVKEY\naws_secret_access_key = s1\n"
      "[cfgprof]\naws_access_key_id = CFGKEY\naws_secret_access_key = s2\n");
  env_.vars["AWS_PROFILE"] = "envprof";
  auto p = provider();
  EXPECT_EQ(p->name(), "shared files (profile envprof)");
  EXPECT_EQ(p->get()->access_key_id, "ENVKEY");
  EXPECT_EQ(provider("cfgprof")->get()->access_key_id, "CFGKEY");  // config beats AWS_PROFILE
}

TEST_F(CredentialsProfileTest, FileLocationsFromEnvironment) {
  std::string creds =
      dir_.write("elsewhere/creds", "[p]\naws_access_key_id = K1\naws_secret_access_key = s\n");
  std::string conf = dir_.write("elsewhere/conf",
                                "[profile q]\naws_access_key_id = K2\n"
                                "aws_secret_access_key = s\n");
  env_.vars["AWS_SHARED_CREDENTIALS_FILE"] = creds;
  env_.vars["AWS_CONFIG_FILE"] = conf;
  EXPECT_EQ(provider("p")->get()->access_key_id, "K1");
  EXPECT_EQ(provider("q")->get()->access_key_id, "K2");
}

TEST_F(CredentialsProfileTest, CredentialsFileWinsWhenBothHaveTheProfile) {
  write_credentials("[dev]\naws_access_key_id = FROMCREDS\naws_secret_access_key = s1\n");
  write_config(
      "[profile dev]\naws_access_key_id = FROMCONFIG\naws_secret_access_key = s2\n"
      "aws_session_token = tok\n");
  auto c = provider("dev")->get();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->access_key_id, "FROMCREDS");
  EXPECT_EQ(c->secret_access_key, "s1");
  EXPECT_EQ(c->session_token, "tok");  // merged from the config file
}

TEST_F(CredentialsProfileTest, NamedProfileMissingIsAnError) {
  write_credentials("[default]\naws_access_key_id = AKID\naws_secret_access_key = s\n");
  env_.vars["AWS_PROFILE"] = "nosuch";
  auto r = provider()->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("'nosuch'"), std::string::npos);
  EXPECT_NE(r.status().message().find("AWS_PROFILE"), std::string::npos);
}

TEST_F(CredentialsProfileTest, ProfileWithoutCredentialsIsNotFound) {
  write_config("[default]\nregion = eu-west-1\n");
  auto r = provider()->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST_F(CredentialsProfileTest, HalfKeysIsAnErrorWithoutSecrets) {
  write_credentials(std::string("[default]\naws_secret_access_key = ") + kSecretKey + "\n");
  auto r = provider()->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("no aws_access_key_id"), std::string::npos);
  expect_no_profile_secrets(r.status());
}

TEST_F(CredentialsProfileTest, UnsupportedSourcesSayWhatToDo) {
  write_config(
      "[profile sso]\nsso_session = corp\nsso_account_id = 1\n"
      "[profile chained]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = default\n");
  auto sso = provider("sso")->get();
  ASSERT_FALSE(sso.ok());
  EXPECT_NE(sso.status().message().find("sso"), std::string::npos);
  EXPECT_NE(sso.status().message().find("export-credentials --profile sso"), std::string::npos);
  auto chained = provider("chained")->get();
  ASSERT_FALSE(chained.ok());
  EXPECT_NE(chained.status().message().find("source_profile"), std::string::npos);
}

// ---- credential_process ----

TEST_F(CredentialsProfileTest, CredentialProcessSuccess) {
  std::string out = dir_.write(
      "out.json", std::string(R"({"Version": 1, "AccessKeyId": "ASIAPROC", "SecretAccessKey": ")") +
                      kSecretKey + R"(", "SessionToken": ")" + kSessionToken +
                      R"(", "Expiration": "2030-01-01T00:00:00Z"})");
  write_config("[profile proc]\ncredential_process = cat '" + out + "'\n");
  auto c = provider("proc")->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ASIAPROC");
  EXPECT_EQ(c->secret_access_key, kSecretKey);
  EXPECT_EQ(c->session_token, kSessionToken);
  ASSERT_TRUE(c->expiration.has_value());
  EXPECT_EQ(*c->expiration, *parse_iso8601("2030-01-01T00:00:00Z"));
}

TEST_F(CredentialsProfileTest, CredentialProcessRunsThroughTheShell) {
  // Pipes and quoting need /bin/sh -c.
  write_config(
      "[default]\ncredential_process = printf '%s' '{\"Version\": 1, \"AccessKeyId\": \"A\", "
      "\"SecretAccessKey\": \"B\"}' | cat\n");
  auto c = provider()->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "A");
  EXPECT_FALSE(c->expiration.has_value());
}

TEST_F(CredentialsProfileTest, CredentialProcessNonZeroExitIsAClearError) {
  std::string out = dir_.write(
      "out.json", std::string(R"({"Version": 1, "AccessKeyId": "ASIAPROC", "SecretAccessKey": ")") +
                      kSecretKey + R"("})");
  write_config("[profile broken]\ncredential_process = cat '" + out + "'; exit 3\n");
  auto r = provider("broken")->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("credential_process of profile 'broken'"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("exited with status 3"), std::string::npos) << r.status();
  expect_no_profile_secrets(r.status());
}

TEST_F(CredentialsProfileTest, CredentialProcessBadJsonIsAClearError) {
  std::string out =
      dir_.write("out.txt", std::string("Secret is ") + kSecretKey + " token " + kSessionToken);
  write_config("[profile bad]\ncredential_process = cat '" + out + "'\n");
  auto r = provider("bad")->get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("credential_process of profile 'bad'"), std::string::npos);
  EXPECT_NE(r.status().message().find("not a JSON object"), std::string::npos);
  expect_no_profile_secrets(r.status());
}

TEST_F(CredentialsProfileTest, CredentialProcessCommandNotFound) {
  write_config("[default]\ncredential_process = /nonexistent/kcl-helper --flag\n");
  auto r = provider()->get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("status 127"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("profile 'default'"), std::string::npos);
  // The command line may carry secrets of its own: it is not repeated.
  EXPECT_EQ(r.status().message().find("--flag"), std::string::npos);
}

TEST_F(CredentialsProfileTest, CredentialProcessTimeoutAndOutputCap) {
  ProfileProviderOptions options;
  options.process_timeout = std::chrono::milliseconds(300);
  options.max_process_output = 1024;
  write_config(
      "[profile slow]\ncredential_process = exec sleep 30\n"
      "[profile chatty]\ncredential_process = yes\n");
  const auto start = std::chrono::steady_clock::now();
  auto slow = provider("slow", options)->get();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_FALSE(slow.ok());
  EXPECT_NE(slow.status().message().find("did not finish within 300 ms"), std::string::npos)
      << slow.status();
  auto chatty = provider("chatty", options)->get();
  ASSERT_FALSE(chatty.ok());
  EXPECT_NE(chatty.status().message().find("more than 1024 bytes"), std::string::npos)
      << chatty.status();
}

TEST_F(CredentialsProfileTest, CredentialProcessThatClosesItsOutputAndStaysIsKilled) {
  // Prints valid credentials, closes stdout and keeps running: the timeout covers its exit
  // too (the refresh was held until it ended).
  ProfileProviderOptions options;
  options.process_timeout = std::chrono::milliseconds(500);
  write_config(
      "[profile lingers]\ncredential_process = printf '{\"Version\": 1, \"AccessKeyId\": "
      "\"AKIDP\", \"SecretAccessKey\": \"s\"}'; exec 1>&-; sleep 20\n");
  const auto start = std::chrono::steady_clock::now();
  auto r = provider("lingers", options)->get();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("closed its output but did not exit within 500 ms and "
                                      "was killed"),
            std::string::npos)
      << r.status();
}

TEST_F(CredentialsProfileTest, KeysWinOverCredentialProcess) {
  write_config(
      "[default]\naws_access_key_id = KEYS\naws_secret_access_key = s\n"
      "credential_process = exit 1\n");
  auto c = provider()->get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "KEYS");
}

}  // namespace
}  // namespace kcl::aws::credentials_internal
