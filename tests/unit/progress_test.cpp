// tests/unit/progress_test.cpp: the progress a build that a caller waits for prints on stderr (fake builders and a fake
// nvcc; stderr captured in the process, or the CLI's in a child), and the terminal's live line.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/jit.hpp"
#include "jit/background.hpp"
#include "jit/progress.hpp"
#include "support/process.hpp"
#include "unit/fake_build.hpp"
#include "unit/test_env.hpp"

namespace fs = std::filesystem;

namespace gemmkit {
namespace {

using testenv::read;

// What this process writes to file descriptor 2 (stderr, a file here: no terminal) while it lives.
class CapturedStderr {
 public:
  explicit CapturedStderr(const fs::path& file) : file_(file) {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  ~CapturedStderr() { restore(); }
  CapturedStderr(const CapturedStderr&) = delete;
  CapturedStderr& operator=(const CapturedStderr&) = delete;

  // Ends the capture and returns what was written.
  std::string text() {
    restore();
    return read(file_);
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  fs::path file_;
  int saved_ = -1;
};

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

class ProgressTest : public ::testing::Test {
 protected:
  void SetUp() override { set_progress(true); }
  void TearDown() override { jit::override_progress(std::nullopt); }

  std::string build_captured(const KernelSource& source, const ModuleBuilder& builder = fake_builder()) {
    CapturedStderr captured(dir_.path() / "stderr.txt");
    cache_.get_or_build(tc_, source, builder);
    return captured.text();
  }

  testenv::TempDir dir_;
  DiskCache cache_{(dir_.path() / "cache").string()};
  Toolchain tc_ = fake_toolchain();
  KernelSource source_ = fake_source();
};

TEST_F(ProgressTest, AWaitedBuildPrintsAStartAndAnEndLineOffATerminal) {
  const std::string err = build_captured(source_);
  const std::string key = cache_.key(tc_, source_);
  EXPECT_EQ(lines(err), 2u) << err;
  EXPECT_EQ(err.rfind("gemmkit: compiling " + source_.kernel_name + " (cache key " + key.substr(0, 12) + "...)\n", 0),
            0u)
      << err;
  EXPECT_NE(err.find("\ngemmkit: compiled " + source_.kernel_name + " in "), std::string::npos) << err;
  EXPECT_EQ(err.find("usually"), std::string::npos) << "no earlier build to estimate from: " << err;
  EXPECT_EQ(err.find('\r'), std::string::npos) << "no terminal, no rewritten line: " << err;
}

TEST_F(ProgressTest, ACacheHitPrintsNothing) {
  build_captured(source_);
  EXPECT_EQ(build_captured(source_), "");
}

TEST_F(ProgressTest, SetProgressFalseSilencesBuildsAndTheProgressPrinter) {
  set_progress(false);
  EXPECT_EQ(build_captured(source_), "");
  EXPECT_EQ(default_progress_style(), ProgressStyle::Quiet);
  EXPECT_FALSE(progress_printer(ProgressStyle::Lines));
  set_progress(true);
  EXPECT_EQ(lines(build_captured(fake_source("another"))), 2u);
  EXPECT_TRUE(progress_printer(ProgressStyle::Lines));
}

TEST_F(ProgressTest, AFailedBuildSaysSo) {
  const ModuleBuilder failing = [](const KernelSource&, const std::string&) { throw Error("the fake builder failed"); };
  CapturedStderr captured(dir_.path() / "stderr.txt");
  EXPECT_THROW(cache_.get_or_build(tc_, source_, failing), Error);
  const std::string err = captured.text();
  EXPECT_EQ(lines(err), 2u) << err;
  EXPECT_NE(err.find("\ngemmkit: compiling " + source_.kernel_name + " failed after "), std::string::npos) << err;
}

TEST_F(ProgressTest, BackgroundBuildsAndCompileManyWithoutACallbackPrintNothing) {
  CapturedStderr captured(dir_.path() / "stderr.txt");
  jit::build_in_background(cache_, tc_, source_, fake_builder());
  jit::wait_for_background_builds();
  cache_.get_or_build_many(tc_, {fake_source("many")}, fake_builder());
  EXPECT_EQ(captured.text(), "");
  EXPECT_TRUE(cache_.find(tc_, source_).has_value());
}

// The estimate: the median builder time of the newest entries of the same family and arch.
TEST_F(ProgressTest, TheEstimateIsTheMedianOfEarlierBuildsOfTheFamilyAndArch) {
  auto source = [](const std::string& name, const std::string& family, const std::string& arch) {
    KernelSource s = fake_source(name);
    s.family = family;
    s.arch_flag = arch;
    return s;
  };
  // Builder seconds as if nvcc had run that long (the manifest's checksums cover the artifact, not the record).
  auto built = [&](const KernelSource& s, double seconds) {
    const CacheEntry entry = cache_.get_or_build(tc_, s, fake_builder());
    const fs::path path = fs::path(entry.dir) / "manifest.json";
    auto manifest = nlohmann::ordered_json::parse(read(path));
    EXPECT_EQ(manifest.at("family").get<std::string>(), s.family);
    manifest["build"]["seconds"]["builder"] = seconds;
    std::ofstream(path) << manifest.dump(2);
  };
  set_progress(false);
  built(source("a", "sm90_collective", "sm_90a"), 30);
  built(source("b", "sm90_collective", "sm_90a"), 44);
  built(source("c", "sm90_collective", "sm_90a"), 100);
  built(source("d", "sm80_universal", "sm_90a"), 500);    // another family
  built(source("e", "sm90_collective", "sm_100a"), 500);  // another arch
  set_progress(true);
  const std::string err = build_captured(source("f", "sm90_collective", "sm_90a"));
  EXPECT_NE(err.find(", usually ~44 s)\n"), std::string::npos) << err;
}

TEST(LiveProgressLine, ShowsTheNameTheTimeAndTheEstimateWithinTheWidth) {
  EXPECT_EQ(jit::live_progress_line("k", 23.4, 45.2, 0, 80), "gemmkit: compiling k ... 23 s (usually ~45 s)");
  EXPECT_EQ(jit::live_progress_line("k", 3, std::nullopt, 2, 80), "gemmkit: compiling k ... 3 s (+2 more)");
  const std::string name = "cutlass3x_sm90_tensorop_s0x0x0gemm_f16_f16_f32_f16_f16_256x256x64_2x1x1_0_ttt_align8";
  const std::string line = jit::live_progress_line(name, 23, 45, 0, 80);
  EXPECT_EQ(line.size(), 79u) << line;                             // the last column stays free
  EXPECT_EQ(line.rfind("gemmkit: compiling ...", 0), 0u) << line;  // the name's start gives way: its end names the tile
  EXPECT_NE(line.find("_2x1x1_0_ttt_align8 ... 23 s (usually ~45 s)"), std::string::npos) << line;
}

// ---- the CLI in a child process, with a fake nvcc ----------------------------------------------------------------

class ProgressCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path nvcc = dir_.path() / "cuda" / "bin" / "nvcc";
    fs::create_directories(nvcc.parent_path());
    std::ofstream(nvcc) << "#!/bin/sh\n"
                           "if [ \"$1\" = --version ]; then echo 'Cuda compilation tools, release 13.0, V13.0.88'; "
                           "exit 0; fi\n"
                           "prev=; out=\n"
                           "for a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; prev=$a; done\n"
                           "head -c 4096 /dev/zero > \"$out\"\n";
    fs::permissions(nvcc, fs::perms::owner_all);
  }

  testing::ProgramResult compile(const std::string& progress) {
    return testing::run_program({GEMMKIT_CLI_PATH, "compile", "--cc", "90"},
                                {{"GEMMKIT_CACHE_DIR", (dir_.path() / "cache").string()},
                                 {"CUDA_HOME", (dir_.path() / "cuda").string()},
                                 {"GEMMKIT_PROGRESS", progress}});
  }

  testenv::TempDir dir_;
};

// The default SM90 kernel builds split (a cubin and a host module at once) and reports as one build.
TEST_F(ProgressCli, CompileReportsItsBuildOnceAndNothingOnAHit) {
  const auto built = compile("");
  ASSERT_EQ(built.exit_code, 0) << built.summary();
  EXPECT_EQ(lines(built.err), 2u) << built.err;
  EXPECT_EQ(built.err.rfind("gemmkit: compiling cutlass3x_sm90_tensorop_", 0), 0u) << built.err;
  EXPECT_NE(built.err.find("\ngemmkit: compiled cutlass3x_sm90_tensorop_"), std::string::npos) << built.err;
  const auto hit = compile("");
  ASSERT_EQ(hit.exit_code, 0) << hit.summary();
  EXPECT_EQ(hit.err, "");
}

TEST_F(ProgressCli, ZeroSilencesIt) {
  const auto built = compile("0");
  ASSERT_EQ(built.exit_code, 0) << built.summary();
  EXPECT_EQ(built.err, "");
  EXPECT_NE(built.out.find("miss"), std::string::npos) << built.out;
}

}  // namespace
}  // namespace gemmkit
