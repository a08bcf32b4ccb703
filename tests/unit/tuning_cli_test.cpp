// tests/unit/tuning_cli_test.cpp: gemmkit tune's database commands (--export, --import) and its usage errors, driven
// as a user would (no nvcc or GPU needed).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "gemmkit/tuning.hpp"
#include "support/cli.hpp"
#include "unit/test_env.hpp"

namespace gemmkit {
namespace {

using testing::run_cli;

// `gemmkit <args>` exits 2 (a usage error) and says `message`.
void expect_usage_error(const std::string& args, const std::string& message, const std::string& cache) {
  const auto r = run_cli(args, cache);
  EXPECT_EQ(r.status, 2) << args << ": " << r.out;
  EXPECT_NE(r.out.find(message), std::string::npos) << args << ": " << r.out;
}

TEST(TuningCli, ExportImportMoveADatabaseBetweenCaches) {
  testenv::TempDir from, to;
  {
    testenv::ScopedEnv cache("GEMMKIT_CACHE_DIR", from.str());
    tuning::Entry e;
    e.identity = {"NVIDIA H200", "13.0", "0.1.0"};
    e.plan = "plan";
    e.m = e.n = e.k = 4096;
    e.tile = R"({"stages":0})";
    e.kernel_name = "k";
    e.ms = 1.0;
    e.heuristic_ms = 1.2;
    tuning::Database().put(e);
  }
  const std::string file = (to.path() / "export.json").string();
  auto r = run_cli("tune --export " + file + " --json", from.str());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("exported"), 1);
  r = run_cli("tune --import " + file + " --json", to.str());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("imported"), 1);
  r = run_cli("tune --export -", to.str());
  ASSERT_EQ(r.status, 0) << r.out;
  const auto exported = nlohmann::json::parse(r.out);
  ASSERT_EQ(exported.at("entries").size(), 1u);
  EXPECT_EQ(exported.at("entries")[0].at("m"), 4096);
  EXPECT_EQ(exported.at("entries")[0].at("tile").at("stages"), 0);
}

TEST(TuningCli, BadInputIsAnErrorNamingIt) {
  testenv::TempDir dir;
  const std::string file = (dir.path() / "bad.json").string();
  std::ofstream(file) << R"({"format": "something else"})";
  auto r = run_cli("tune --import " + file + " --json", dir.str());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("error"), "ConfigError");
  std::ofstream(file) << "not json";
  r = run_cli("tune --import " + file, dir.str());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("is not JSON"), std::string::npos) << r.out;
  r = run_cli("tune --import " + (dir.path() / "missing.json").string(), dir.str());
  EXPECT_EQ(r.status, 2) << r.out;
  expect_usage_error("tune --suite --suite-groups square,nope", "unknown suite group 'nope'", dir.str());
  expect_usage_error("tune --suite-groups square", "--suite-groups needs --suite", dir.str());
  r = run_cli("tune --max-candidates 0", dir.str());
  EXPECT_EQ(r.status, 2) << r.out;
  expect_usage_error("tune --min-gain 1.5", "expects a fraction in [0, 1); got '1.5'", dir.str());
  // --prebuild compiles a suite's candidates for a named GPU: both must be given.
  expect_usage_error("tune --prebuild --cc 90", "--prebuild needs --suite", dir.str());
  expect_usage_error("tune --suite --prebuild", "--prebuild needs --cc", dir.str());
}

}  // namespace
}  // namespace gemmkit
