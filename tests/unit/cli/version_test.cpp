// The version is set once, in the top-level CMakeLists.txt's project() line, and everything
// that shows one agrees with it: kcl::version() (the library), `kcl --version` (the command
// line) and the Python package's kcl.__version__ (when the build has it).
#include "kcl/version.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "support/command_output.h"

namespace {

// The version in CMakeLists.txt, read from the file itself (not from a definition the
// build passed down, which is what the other three are made from).
std::string cmake_project_version() {
  const std::string path = std::string(KCL_SOURCE_DIR) + "/CMakeLists.txt";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  // `project(kcl VERSION x.y.z ...)`, read without std::regex (GCC 12 warns inside it at -O1
  // with the sanitizers: tests/CMakeLists.txt).
  const std::string s = text.str();
  std::size_t at = s.find("project(");
  while (at != std::string::npos) {
    std::istringstream words(s.substr(at + 8, 200));
    std::string name, keyword, version;
    words >> name >> keyword >> version;
    if (name == "kcl" && keyword == "VERSION") {
      const std::size_t end = version.find_first_not_of("0123456789.");
      return version.substr(0, end);
    }
    at = s.find("project(", at + 1);
  }
  ADD_FAILURE() << path << " has no `project(kcl VERSION x.y.z)` line";
  return "";
}

using kcl::testing::command_output;

TEST(Version, LibraryVersionIsTheCmakeProjectVersion) {
  const std::string v = cmake_project_version();
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(std::string(kcl::version()), v);
}

TEST(Version, KclDashDashVersionPrintsIt) {
#ifndef KCL_CLI_PATH
  GTEST_SKIP() << "this build has no kcl command line (KCL_BUILD_TOOLS is OFF)";
#else
  int status = 0;
  const std::string out = command_output(std::string("'") + KCL_CLI_PATH + "' --version", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "kcl " + cmake_project_version() + "\n");
#endif
}

TEST(Version, PythonPackageVersionIsIt) {
#ifndef KCL_PYTHON_PACKAGE_DIR
  GTEST_SKIP() << "this build has no Python package (KCL_BUILD_PYTHON is OFF)";
#else
  int status = 0;
  const std::string out =
      command_output(std::string("cd / && PYTHONPATH='") + KCL_PYTHON_PACKAGE_DIR + "' '" +
                         KCL_PYTHON_EXECUTABLE + "' -c 'import kcl; print(kcl.__version__)'",
                     &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, cmake_project_version() + "\n");
#endif
}

}  // namespace
