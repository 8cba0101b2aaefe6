// Helpers of the HTTP endpoint's integration tests: GET on a worker's endpoint, running a
// command, a temporary folder, and headless Chromium rendering a page (its DOM after the
// page's script ran, and optionally a screenshot).
#pragma once

#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace kcl::worker_test {

namespace fs = std::filesystem;

struct Url {
  std::string host;
  int port = 0;
};

inline Url split(const std::string& url) {
  // http://HOST:PORT
  auto rest = url.substr(std::string("http://").size());
  auto colon = rest.rfind(':');
  return {rest.substr(0, colon), std::stoi(rest.substr(colon + 1))};
}

inline httplib::Result get(const std::string& url, const std::string& path,
                           const httplib::Headers& headers = {}) {
  Url u = split(url);
  httplib::Client c(u.host, u.port);
  c.set_read_timeout(30, 0);
  c.set_connection_timeout(5, 0);
  return c.Get(path.c_str(), headers);
}

// Runs a command; returns its stdout (stderr kept apart) and exit code.
inline std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = ::pclose(p);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

class TmpDir {
 public:
  TmpDir() {
    char tmpl[] = "/tmp/kcl_http_test_XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TmpDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Sums of records processed and leases held over the workers' expositions, as the
// independent parser reads them: "records=<n> leases=<n>".
inline std::string parse_fleet_metrics(const std::vector<std::string>& expositions) {
  TmpDir dir;
  std::string args;
  for (std::size_t i = 0; i < expositions.size(); ++i) {
    auto f = dir.path() / ("worker" + std::to_string(i) + ".txt");
    std::ofstream(f) << expositions[i];
    args += " " + f.string();
  }
  auto script = dir.path() / "sum.py";
  std::ofstream(script) << "import sys\n"
                           "from prometheus_client.parser import text_string_to_metric_families\n"
                           "records = 0.0\nleases = 0.0\n"
                           "for path in sys.argv[1:]:\n"
                           "  for fam in text_string_to_metric_families(open(path).read()):\n"
                           "    for s in fam.samples:\n"
                           "      if s.name == 'kcl_records_processed_total':\n"
                           "        assert fam.type == 'counter' and 'shard' in s.labels\n"
                           "        records += s.value\n"
                           "      if s.name == 'kcl_leases_held':\n"
                           "        assert fam.type == 'gauge'\n"
                           "        leases += s.value\n"
                           "print('records=%d leases=%d' % (records, leases))\n";
  // Debian's python3, where python3-prometheus-client is installed.
  auto [rc, out] = run("/usr/bin/python3 " + script.string() + args + " 2>&1");
  return rc == 0 ? out : "parser failed: " + out;
}

// Chromium renders `url` headless; returns the DOM after the page's script ran (it polls
// /status.json and fills the tables), and optionally saves a screenshot.
inline std::string chromium_dom(const std::string& url, const std::string& screenshot = {},
                                const std::string& window = "1280,640") {
  TmpDir profile;
  const std::string common =
      "/usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir=" +
      profile.path().string() + " --virtual-time-budget=3000 ";
  if (!screenshot.empty()) {
    run(common + "--window-size=" + window + " --hide-scrollbars --screenshot=" + screenshot + " " +
        url + " 2>/dev/null");
  }
  return run(common + "--dump-dom " + url + " 2>/dev/null").second;
}

}  // namespace kcl::worker_test
