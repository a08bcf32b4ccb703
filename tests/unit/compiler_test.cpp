// tests/unit/compiler_test.cpp: the nvcc command line, toolchain discovery and compile errors, using fake
// nvcc / host-compiler scripts (the real nvcc never runs in the unit tier).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "jit/process.hpp"
#include "jit/toolchain_detail.hpp"
#include "unit/test_env.hpp"
#include "util/sha256.hpp"

namespace fs = std::filesystem;

namespace gemmkit {
namespace {

using namespace toolchain_detail;

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not found in:\n" << text;
}

constexpr const char* kNvcc130Version =
    "nvcc: NVIDIA (R) Cuda compiler driver\n"
    "Copyright (c) 2005-2025 NVIDIA Corporation\n"
    "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\n"
    "Cuda compilation tools, release 13.0, V13.0.88\n"
    "Build cuda_13.0.r13.0/compiler.36424714_0\n";

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// An executable /bin/sh script at `path`.
void write_script(const fs::path& path, const std::string& body) {
  write(path, "#!/bin/sh\n" + body + "\n");
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
}

// A fake nvcc that prints `version_text` for --version and otherwise runs `build_body`.
void write_fake_nvcc(const fs::path& path, const std::string& version_text, const std::string& build_body) {
  write(path.parent_path() / "version.txt", version_text);
  write_script(path,
               "if [ \"$1\" = --version ]; then cat \"$(dirname \"$0\")/version.txt\"; exit 0; fi\n" + build_body);
}

// A CUTLASS tree with just the files discovery checks.
void write_fake_cutlass(const fs::path& root) {
  write(root / "include" / "cutlass" / "cutlass.h", "#pragma once\n");
  write(root / "include" / "cutlass" / "version.h",
        "#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n#define CUTLASS_PATCH 0\n");
  fs::create_directories(root / "tools" / "util" / "include");
}

Toolchain toolchain_with(const std::string& nvcc) {
  Toolchain tc;
  tc.nvcc = nvcc;
  tc.cutlass_root = "/deps/cutlass";
  tc.device_include_dir = "/src/gemmkit/device/include";
  return tc;
}

bool contains(const std::vector<std::string>& argv, const std::string& arg) {
  return std::find(argv.begin(), argv.end(), arg) != argv.end();
}

// ---- nvcc command ------------------------------------------------------------------------------------------

TEST(NvccCommand, Sm90a) {
  const Toolchain tc = toolchain_with("/cuda/bin/nvcc");
  const auto argv = nvcc_command(tc, {"k", "sm_90a", ""}, "/w/kernel.cu", "/w/kernel.so");
  ASSERT_GE(argv.size(), 4u);
  EXPECT_EQ(argv.front(), "/cuda/bin/nvcc");
  for (const char* flag : {"-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "-Xcompiler=-fPIC", "-shared",
                           "-gencode=arch=compute_90a,code=sm_90a", "-I/deps/cutlass/include",
                           "-I/deps/cutlass/tools/util/include", "-I/src/gemmkit/device/include", "/w/kernel.cu"}) {
    EXPECT_TRUE(contains(argv, flag)) << flag;
  }
  const auto cudart = std::find(argv.begin(), argv.end(), "-cudart");
  ASSERT_NE(cudart, argv.end());
  EXPECT_EQ(*(cudart + 1), "shared");
  EXPECT_EQ(argv[argv.size() - 2], "-o");
  EXPECT_EQ(argv.back(), "/w/kernel.so");
}

TEST(NvccCommand, Sm80) {
  const auto argv = nvcc_command(toolchain_with("nvcc"), {"k", "sm_80", ""}, "a.cu", "a.so");
  EXPECT_TRUE(contains(argv, "-gencode=arch=compute_80,code=sm_80"));
  EXPECT_TRUE(contains(argv, "-DNDEBUG"));
  EXPECT_EQ(std::count_if(argv.begin(), argv.end(), [](const std::string& a) { return a.rfind("-gencode", 0) == 0; }),
            1);
}

TEST(NvccCommand, BadArchIsAConfigError) {
  for (const char* arch : {"", "90a", "sm90", "compute_90", "sm_90ab"}) {
    EXPECT_THROW(nvcc_command(toolchain_with("nvcc"), {"k", arch, ""}, "a.cu", "a.so"), ConfigError) << arch;
  }
}

// ---- compile_module with a fake nvcc ----------------------------------------------------------------------

TEST(CompileModule, SuccessLeavesSourceAndModule) {
  testenv::TempDir dir;
  const fs::path nvcc = dir.path() / "cuda" / "bin" / "nvcc";
  write_fake_nvcc(nvcc, kNvcc130Version, "for a; do out=$a; done\necho module > \"$out\"");
  const fs::path work = dir.path() / "work";
  compile_module(toolchain_with(nvcc.string()), {"k", "sm_90a", "int x;\n"}, work.string());
  EXPECT_TRUE(fs::exists(work / "kernel.so"));
  std::ifstream source(work / "kernel.cu");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(source), {}), "int x;\n");
}

TEST(CompileModule, RecordsTheBuildAndHonoursTheDebugKnobs) {
  testenv::TempDir dir;
  const fs::path nvcc = dir.path() / "cuda" / "bin" / "nvcc";
  write_fake_nvcc(nvcc, kNvcc130Version, "for a; do out=$a; done\necho module > \"$out\"");
  write_script(dir.path() / "cuda" / "bin" / "cuobjdump", "echo \"SASS of $2\"");
  Toolchain tc = toolchain_with(nvcc.string());
  tc.cuda_home = (dir.path() / "cuda").string();
  const fs::path work = dir.path() / "work";
  testenv::ScopedEnv keep("GEMMKIT_KEEP_TEMP", "1"), sass("GEMMKIT_DUMP_SASS", "1");
  compile_module(tc, {"k", "sm_90a", "int x;\n"}, work.string());
  std::ifstream sass_file(work / "kernel.sass");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(sass_file), {}),
            "SASS of " + (work / "kernel.so").string() + "\n");
  EXPECT_TRUE(fs::is_directory(work / "nvcc"));
  std::ifstream record_file(work / kBuildRecordFile);
  const auto record = nlohmann::ordered_json::parse(record_file);
  const auto argv = record.at("nvcc_argv").get<std::vector<std::string>>();
  EXPECT_TRUE(contains(argv, "--keep")) << record.dump();
  EXPECT_EQ(argv.front(), nvcc.string());
  EXPECT_TRUE(record.at("seconds").contains("nvcc"));
  EXPECT_TRUE(record.at("seconds").contains("dump_sass"));
}

TEST(CompileModule, FailureThrowsCompileErrorAndKeepsEverything) {
  testenv::TempDir dir;
  const fs::path nvcc = dir.path() / "cuda" / "bin" / "nvcc";
  write_fake_nvcc(nvcc, kNvcc130Version, "echo 'kernel.cu(3): error: identifier \"oops\" is undefined' >&2\nexit 2");
  const fs::path work = dir.path() / "work";
  try {
    compile_module(toolchain_with(nvcc.string()), {"cutlass_kernel_x", "sm_80", "oops;\n"}, work.string());
    FAIL() << "expected CompileError";
  } catch (const CompileError& error) {
    EXPECT_EQ(error.exit_code, 2);
    EXPECT_TRUE(Contains(error.log, "identifier \"oops\" is undefined"));
    EXPECT_EQ(fs::path(error.source_path), work / "kernel.cu");
    EXPECT_TRUE(fs::exists(error.source_path));
    EXPECT_EQ(error.argv.front(), nvcc.string());
    const std::string message = error.what();
    EXPECT_TRUE(Contains(message, "cutlass_kernel_x"));
    EXPECT_TRUE(Contains(message, "exit code 2"));
    EXPECT_TRUE(Contains(message, work.string()));
    EXPECT_TRUE(Contains(message, "is undefined"));
    std::ifstream log(work / "compile.log");
    EXPECT_TRUE(Contains(std::string(std::istreambuf_iterator<char>(log), {}), "is undefined"));
  }
}

TEST(CompileModule, ExitZeroWithoutModuleIsAnError) {
  testenv::TempDir dir;
  const fs::path nvcc = dir.path() / "bin" / "nvcc";
  write_fake_nvcc(nvcc, kNvcc130Version, "exit 0");
  EXPECT_THROW(compile_module(toolchain_with(nvcc.string()), {"k", "sm_80", ""}, (dir.path() / "w").string()),
               CompileError);
}

// ---- process -----------------------------------------------------------------------------------------------

TEST(RunProcess, CapturesBothStreamsAndTheExitCode) {
  const ProcessResult result = run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 7"});
  EXPECT_EQ(result.exit_code, 7);
  EXPECT_TRUE(Contains(result.output, "out\n"));
  EXPECT_TRUE(Contains(result.output, "err\n"));
  EXPECT_THROW(run_process({"/nonexistent/gemmkit-no-such-program"}), ToolchainError);
}

TEST(RunProcess, ShellQuote) {
  EXPECT_EQ(shell_quote({"nvcc", "-O3", "a b", "it's"}), "nvcc -O3 'a b' 'it'\\''s'");
}

// ---- toolchain pieces --------------------------------------------------------------------------------------

TEST(Toolchain, ParseNvccVersion) {
  const NvccVersion v = parse_nvcc_version(kNvcc130Version);
  EXPECT_EQ(v.version, "13.0");
  EXPECT_EQ(v.build, "Build cuda_13.0.r13.0/compiler.36424714_0");
  EXPECT_EQ(parse_nvcc_version("Cuda compilation tools, release 12.4, V12.4.131\n").version, "12.4");
  try {
    parse_nvcc_version("Cuda compilation tools, release 12.2, V12.2.140\n");
    FAIL() << "expected ToolchainError";
  } catch (const ToolchainError& error) {
    EXPECT_TRUE(Contains(error.what(), "CUDA >= 12.4"));
    EXPECT_TRUE(Contains(error.what(), "CUDA_HOME"));
  }
  EXPECT_THROW(parse_nvcc_version("something else"), ToolchainError);
}

TEST(Toolchain, ParseCutlassVersion) {
  EXPECT_EQ(parse_cutlass_version("#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n#define CUTLASS_PATCH 1\n"),
            "4.2.1");
  EXPECT_EQ(parse_cutlass_version("#define CUTLASS_MAJOR 4\n"), "");
}

TEST(Toolchain, FindNvccOrder) {
  testenv::TempDir dir;
  const fs::path home_nvcc = dir.path() / "home" / "bin" / "nvcc";
  const fs::path path_nvcc = dir.path() / "onpath" / "nvcc";
  write_script(home_nvcc, "exit 0");
  write_script(path_nvcc, "exit 0");
  const std::string path_env = (dir.path() / "empty").string() + ":" + path_nvcc.parent_path().string();
  EXPECT_EQ(find_nvcc((dir.path() / "home").c_str(), path_env.c_str(), ""), home_nvcc.string());
  EXPECT_EQ(find_nvcc("/bogus/cuda", path_env.c_str(), ""), path_nvcc.string());
  EXPECT_EQ(find_nvcc(nullptr, "/bogus", home_nvcc.string()), home_nvcc.string());
}

TEST(Toolchain, NvccMissingSaysHowToFixIt) {
  try {
    find_nvcc("/bogus/cuda", "/bogus/bin", "/bogus/usr/local/cuda/bin/nvcc");
    FAIL() << "expected ToolchainError";
  } catch (const ToolchainError& error) {
    EXPECT_TRUE(Contains(error.what(), "nvcc not found"));
    EXPECT_TRUE(Contains(error.what(), "CUDA_HOME=/bogus/cuda"));
    EXPECT_TRUE(Contains(error.what(), ">= 12.4"));
  }
}

TEST(Toolchain, ScanDeviceHeadersHashesEachHeaderAndListsItsGemmkitIncludes) {
  testenv::TempDir dir;
  write(dir.path() / "gemmkit" / "abi.h", "abi");
  write(dir.path() / "gemmkit" / "entry.hpp",
        "#include <cstdint>\n#include \"gemmkit/abi.h\"\n  #  include <gemmkit/common.hpp>\n#include "
        "\"cutlass/cutlass.h\"\n");
  const auto headers = scan_device_headers(dir.str());
  ASSERT_EQ(headers.size(), 2u);
  EXPECT_EQ(headers.at("gemmkit/abi.h").sha256, sha256_hex("abi"));
  EXPECT_TRUE(headers.at("gemmkit/abi.h").includes.empty());
  EXPECT_EQ(headers.at("gemmkit/entry.hpp").includes,
            (std::vector<std::string>{"gemmkit/abi.h", "gemmkit/common.hpp"}));

  Toolchain tc;
  tc.device_headers = headers;
  const std::string source = "#include \"gemmkit/entry.hpp\"\n";
  const std::string digest = included_headers_digest(tc, source);
  EXPECT_EQ(digest.size(), 64u);
  write(dir.path() / "gemmkit" / "abi.h", "abi2");  // included through entry.hpp
  tc.device_headers = scan_device_headers(dir.str());
  EXPECT_NE(included_headers_digest(tc, source), digest);
  EXPECT_EQ(included_headers_digest(tc, "#include \"gemmkit/abi.h\"\n"),
            included_headers_digest(tc, "#include <gemmkit/abi.h>\n"));
}

TEST(Toolchain, FindCutlassOrder) {
  testenv::TempDir dir;
  auto make_tree = [&](const fs::path& root) {
    write(root / "include" / "cutlass" / "cutlass.h", "");
    write(root / "include" / "cutlass" / "version.h", "#define CUTLASS_MAJOR 4\n");
    fs::create_directories(root / "tools" / "util" / "include");
  };
  const fs::path installed = dir.path() / "share" / "gemmkit" / "cutlass", fallback = dir.path() / "deps" / "cutlass";
  make_tree(fallback);
  const std::vector<std::string> candidates = {installed.string(), fallback.string()};
  EXPECT_EQ(find_cutlass(nullptr, candidates), fallback.string());
  make_tree(installed);
  EXPECT_EQ(find_cutlass("", candidates), installed.string());
  EXPECT_EQ(find_cutlass(fallback.c_str(), candidates), fallback.string());  // CUTLASS_PATH wins
  try {
    find_cutlass(nullptr, {(dir.path() / "a").string(), (dir.path() / "b").string()});
    FAIL() << "expected ToolchainError";
  } catch (const ToolchainError& error) {
    EXPECT_TRUE(Contains(error.what(), (dir.path() / "a").string() + ", " + (dir.path() / "b").string()));
    EXPECT_TRUE(Contains(error.what(), "CUTLASS_PATH"));
  }
  EXPECT_THROW(find_cutlass((dir.path() / "a").c_str(), candidates), ToolchainError);  // no silent fallback
}

TEST(Toolchain, InstalledDataDirs) {
  EXPECT_EQ(installed_data_dirs("/opt/gk/lib", "../share/gemmkit"),
            (std::vector<std::string>{"/opt/gk/share/gemmkit", "/opt/gk/lib"}));
  EXPECT_TRUE(installed_data_dirs("", "../share/gemmkit").empty());
}

TEST(Toolchain, HostCompilerCommand) {
  testenv::TempDir dir;
  EXPECT_EQ(host_compiler_command(nullptr), "g++");
  EXPECT_EQ(host_compiler_command("/opt/gcc-12/bin/g++"), "/opt/gcc-12/bin/g++");
  EXPECT_EQ(host_compiler_command(dir.path().c_str()), (dir.path() / "g++").string());
}

// ---- discover_uncached against fake trees ------------------------------------------------------------------

class DiscoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_fake_cutlass(dir_.path() / "cutlass");
    write_fake_nvcc(dir_.path() / "cuda" / "bin" / "nvcc", kNvcc130Version, "exit 1");
    write_script(dir_.path() / "cc" / "fakecc",
                 "if [ \"$1\" = -dumpmachine ]; then echo x86_64-test-linux; exit; fi\n"
                 "echo 'fakecc (Test) 1.0'\necho 'second line'");
  }
  std::string at(const char* relative) const { return (dir_.path() / relative).string(); }

  testenv::TempDir dir_;
  testenv::ScopedEnv cutlass_{"CUTLASS_PATH", at("cutlass")};
  testenv::ScopedEnv cuda_home_{"CUDA_HOME", at("cuda")};
  testenv::ScopedEnv ccbin_{"NVCC_CCBIN", at("cc/fakecc")};
};

TEST_F(DiscoverTest, FindsEverything) {
  const Toolchain tc = Toolchain::discover_uncached();
  EXPECT_EQ(tc.nvcc, at("cuda/bin/nvcc"));
  EXPECT_EQ(tc.cuda_home, at("cuda"));
  EXPECT_EQ(tc.nvcc_version, "13.0");
  EXPECT_EQ(tc.nvcc_build, "Build cuda_13.0.r13.0/compiler.36424714_0");
  EXPECT_EQ(tc.host_compiler, "fakecc (Test) 1.0");
  EXPECT_EQ(tc.host_target, "x86_64-test-linux");
  EXPECT_EQ(tc.cutlass_root, at("cutlass"));
  EXPECT_EQ(tc.cutlass_version, "4.2.0");
  EXPECT_TRUE(fs::is_directory(tc.device_include_dir));
  EXPECT_EQ(tc.device_headers, scan_device_headers(tc.device_include_dir));
}

TEST_F(DiscoverTest, FindHeadersRunsNoProgram) {
  // With no usable nvcc or host compiler discover() throws; find_headers() still finds both header trees.
  testenv::ScopedEnv cuda_home("CUDA_HOME", "/bogus/cuda");
  testenv::ScopedEnv ccbin("NVCC_CCBIN", at("cc/no-such-compiler"));
  EXPECT_THROW(Toolchain::discover_uncached(), ToolchainError);
  const Toolchain tc = Toolchain::find_headers();
  EXPECT_EQ(tc.cutlass_root, at("cutlass"));
  EXPECT_EQ(tc.cutlass_version, "4.2.0");
  EXPECT_EQ(tc.device_headers, scan_device_headers(tc.device_include_dir));
  EXPECT_TRUE(tc.nvcc.empty() && tc.nvcc_version.empty() && tc.host_compiler.empty() && tc.host_target.empty());
}

TEST_F(DiscoverTest, EmptyCutlassPathSaysHowToFixIt) {
  fs::create_directories(dir_.path() / "empty");
  testenv::ScopedEnv cutlass("CUTLASS_PATH", at("empty"));
  try {
    Toolchain::discover_uncached();
    FAIL() << "expected ToolchainError";
  } catch (const ToolchainError& error) {
    EXPECT_TRUE(Contains(error.what(), at("empty")));
    EXPECT_TRUE(Contains(error.what(), "run scripts/setup.sh or set CUTLASS_PATH to a CUTLASS 4.2 checkout"));
  }
}

TEST_F(DiscoverTest, OldNvccIsRefused) {
  write(dir_.path() / "cuda" / "bin" / "version.txt", "Cuda compilation tools, release 12.2, V12.2.140\n");
  EXPECT_THROW(Toolchain::discover_uncached(), ToolchainError);
}

TEST_F(DiscoverTest, MissingHostCompilerIsAToolchainError) {
  testenv::ScopedEnv ccbin("NVCC_CCBIN", at("cc/no-such-compiler"));
  EXPECT_THROW(Toolchain::discover_uncached(), ToolchainError);
}

TEST_F(DiscoverTest, NvccMissingEverywhere) {
  if (fs::exists("/usr/local/cuda/bin/nvcc")) GTEST_SKIP() << "/usr/local/cuda/bin/nvcc exists: the fallback finds it";
  testenv::ScopedEnv cuda_home("CUDA_HOME", "/bogus/cuda");
  testenv::ScopedEnv path("PATH", at("cc"));
  EXPECT_THROW(Toolchain::discover_uncached(), ToolchainError);
}

// ---- job limit ---------------------------------------------------------------------------------------------

TEST(MaxParallelCompiles, DefaultAndOverride) {
  {
    testenv::ScopedEnv unset("GEMMKIT_MAX_JOBS", std::nullopt);
    EXPECT_GE(max_parallel_compiles(), 1);
  }
  {
    testenv::ScopedEnv jobs("GEMMKIT_MAX_JOBS", "3");
    EXPECT_EQ(max_parallel_compiles(), 3);
  }
  for (const char* bad : {"abc", "0", "-2", "4x"}) {
    testenv::ScopedEnv jobs("GEMMKIT_MAX_JOBS", bad);
    EXPECT_THROW(max_parallel_compiles(), ConfigError) << bad;
  }
}

}  // namespace
}  // namespace gemmkit
