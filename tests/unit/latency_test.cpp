// tests/unit/latency_test.cpp: run() never waits on a compile it did not ask for (background builds, counted with
// the cache's build counter, not a clock; the kernel slots are kernel_slots_test.cpp's), kernel packs, and interrupts
// that stop nvcc's process group (a fake nvcc: a shell script that starts a child of its own and sleeps).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "gemmkit/packs.hpp"
#include "jit/background.hpp"
#include "support/cli.hpp"
#include "unit/background_gate.hpp"
#include "unit/fake_build.hpp"
#include "unit/test_env.hpp"
#include "util/notes.hpp"
#include "verify/shape_suite.hpp"

namespace fs = std::filesystem;

namespace gemmkit {
namespace {

// A plan as the defaults pack declares it: one element type, row-major, the library's defaults for the rest.
GemmOptions testing_options(int cc, DataType element = DataType::f16) {
  GemmOptions o;
  o.element = element;
  o.layout = Layout::RowMajor;
  o.cc = cc;
  return o;
}

TEST(BackgroundBuilds, ReturnAtOnceBuildOnceAndCountAsBackground) {
  testenv::TempDir dir;
  DiskCache cache(dir.str());
  Gate gate;
  const KernelSource source = unique_source("once");
  const CacheCounters before = cache_counters();
  const auto build = jit::build_in_background(cache, fake_toolchain(), source, gate.builder());
  const auto again = jit::build_in_background(cache, fake_toolchain(), source, gate.builder());
  EXPECT_EQ(build, again);  // one build per key
  EXPECT_FALSE(build->finished());
  EXPECT_EQ(cache_counters().builds, before.builds);  // nothing was built on this thread
  EXPECT_FALSE(cache.find(fake_toolchain(), source));
  gate.open();
  jit::wait_for_background_builds();
  EXPECT_EQ(build->state(), jit::BackgroundBuild::State::done);
  EXPECT_EQ(cache_counters().builds, before.builds + 1);
  EXPECT_EQ(cache_counters().background_builds, before.background_builds + 1);
  EXPECT_TRUE(cache.find(fake_toolchain(), source));
}

// The same kernel asked for in another cache folder (GEMMKIT_CACHE_DIR moved) is built there too, not taken for done.
TEST(BackgroundBuilds, AnotherCacheFolderGetsItsOwnBuild) {
  testenv::TempDir first_dir, second_dir;
  DiskCache first(first_dir.str()), second(second_dir.str());
  Gate gate;
  const KernelSource source = unique_source("two folders");
  const auto one = jit::build_in_background(first, fake_toolchain(), source, gate.builder());
  const auto other = jit::build_in_background(second, fake_toolchain(), source, gate.builder());
  EXPECT_NE(one, other);
  gate.open();
  jit::wait_for_background_builds();
  EXPECT_TRUE(first.find(fake_toolchain(), source));
  EXPECT_TRUE(second.find(fake_toolchain(), source));
}

TEST(BackgroundBuilds, AFailureIsAWarningOnceAndStaysInTheHandle) {
  testenv::TempDir dir;
  DiskCache cache(dir.str());
  Gate gate;
  const KernelSource source = unique_source("fails");
  ::testing::internal::CaptureStderr();
  const auto build = jit::build_in_background(cache, fake_toolchain(), source, gate.builder(/*fail=*/true));
  gate.open();
  wait_until_finished(*build);
  jit::wait_for_background_builds();
  (void)jit::build_in_background(cache, fake_toolchain(), source, gate.builder(/*fail=*/true));  // not retried
  jit::wait_for_background_builds();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(build->state(), jit::BackgroundBuild::State::failed);
  EXPECT_NE(build->error().find("nvcc failed on purpose"), std::string::npos);
  const std::string warning = "background compile of kernel " + source.kernel_name + " failed";
  ASSERT_NE(err.find(warning), std::string::npos) << err;
  EXPECT_EQ(err.find(warning, err.find(warning) + 1), std::string::npos) << "warned twice: " << err;
}

// ---- packs ----------------------------------------------------------------------------------------------------

TEST(Packs, PackLinesAreCompilePlans) {
  const auto specs = parse_pack(
      "# two kernels\n"
      "--cc 90 --element f16 --element-accumulator f32\n"
      "\n"
      "cc=80 element=bf16 element-accumulator=f32 layout-b=ColumnMajor tile=1   # a comment\n");
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].name(), Gemm(testing::f16_row(90)).spec().name());
  EXPECT_EQ(specs[1].cc, 80);
  EXPECT_EQ(specs[1].element_a, DataType::bf16);
  GemmOptions bf16 = testing::f16_row(80);
  bf16.element = DataType::bf16;
  bf16.layout_b = Layout::ColumnMajor;
  Gemm plan(bf16);
  EXPECT_EQ(specs[1].tile, plan.tile_descriptions()[1]);
}

// A line with a problem holds the kernel run() picks for it: here parallel split-K, FP8's 128 x 192 default and a
// block-scaled FP8 kernel.
TEST(Packs, APackLineWithAProblemHoldsRunsKernelForIt) {
  const auto specs = parse_pack(
      "--cc 90 --element f16 --element-accumulator f32 --m 512 --n 512 --k 16384\n"
      "cc=90 element=e4m3 element-c=bf16 element-d=bf16 layout-b=col scale=row_and_column m=8192 n=8192 k=4096\n"
      "--cc 90 --element e4m3 --element-c bf16 --element-d bf16 --layout-b col --block-scaling blockwise --m 4096 "
      "--n 7168 --k 2048\n");
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].name(), Gemm(testing::f16_row(90)).spec_for_problem(512, 512, 16384).name());
  EXPECT_EQ(specs[0].split_k_mode, SplitKMode::Parallel);
  EXPECT_EQ(specs[1].name(),
            "cutlass3x_sm90_tensorop_s0x0x0gemm_e4m3_e4m3_f32_bf16_bf16_256x192x128_2x1x1_0_tnt_align16_"
            "warpspecialized_cooperative_fp8overlap_epi_tma_"
            "scalerowcolumn");
  EXPECT_EQ(specs[2].block_scaling, BlockScaling::Blockwise);  // DeepSeek-V3's scales, as the plan takes them
  EXPECT_TRUE(specs[2].name().ends_with("_blockwise")) << specs[2].name();
}

// A pack line may ask for the kernel that takes its activation at launch: one entry for every activation.
TEST(Packs, APackLineTakesTheActivationAtLaunch) {
  const auto specs = parse_pack(
      "--cc 90 --element f16 --element-accumulator f32 --activation relu --activation-at-launch 1\n"
      "--cc 90 --element f16 --element-accumulator f32 --activation gelu --activation-at-launch 1\n"
      "--cc 90 --element f16 --element-accumulator f32 --activation gelu --activation-at-launch 0\n");
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_TRUE(specs[0].activation_at_launch);
  EXPECT_EQ(specs[0].canonical(), specs[1].canonical());
  EXPECT_FALSE(specs[2].activation_at_launch);
  EXPECT_TRUE(specs[2].name().ends_with("_gelu")) << specs[2].name();
  EXPECT_THROW(parse_pack("--cc 90 --activation relu --activation-at-launch 2\n"), ConfigError);
}

// A --grouped line names a GroupedGemm plan's kernel, or with --run-time-kernels every kernel its runs pick; options
// only dense plans take are refused by name.
TEST(Packs, APackLineMayNameAGroupedKernel) {
  const auto specs = parse_pack(
      "--cc 90 --grouped --element bf16 --element-accumulator f32 --layout-b col --tile 3\n"
      "--cc 90 --grouped --kernel-cc 80 --element f16 --element-accumulator f32\n"
      "--cc 90 --grouped --element bf16 --element-accumulator f32 --layout-b col --run-time-kernels\n");
  GemmOptions moe = testing_options(90, DataType::bf16);
  moe.element_accumulator = DataType::f32;
  moe.layout_b = Layout::ColumnMajor;
  const std::vector<KernelSpec> moe_kernels = GroupedGemm(moe).run_time_kernels();
  ASSERT_EQ(moe_kernels.size(), 3u);  // the plan's kernel and the MoE form's two wide tiles
  ASSERT_EQ(specs.size(), 5u);
  EXPECT_EQ(specs[0].family, KernelFamily::Sm90Grouped);
  EXPECT_EQ(specs[0].tile, GroupedGemm(moe).tile_descriptions()[3]);
  EXPECT_EQ(specs[1].family, KernelFamily::Sm80Grouped);
  EXPECT_EQ(specs[2].canonical(), moe_kernels[0].canonical());
  EXPECT_EQ(specs[3].canonical(), moe_kernels[1].canonical());
  EXPECT_EQ(specs[4].canonical(), moe_kernels[2].canonical());
  try {
    parse_pack("--cc 90 --grouped --bias row\n", "p.txt");
    ADD_FAILURE() << "a grouped line with a bias was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("p.txt line 1: --bias does not apply to a --grouped line"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_pack("--cc 90 --grouped --m 64 --n 64 --k 64\n"), ConfigError);
}

TEST(Packs, BadPackLinesNameTheLine) {
  auto message = [](const std::string& text) {
    try {
      parse_pack(text, "p.txt");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("--cc 90\n--cc 90 --elemnt f16\n").find("p.txt line 2: unknown option --elemnt"),
            std::string::npos);
  EXPECT_NE(message("--element f16\n").find("p.txt line 1: give --cc"), std::string::npos);
  EXPECT_NE(message("--cc 90 --element f17\n").find("'f17'"), std::string::npos);
  EXPECT_NE(message("--cc 90 --tile 9999\n").find("out of range"), std::string::npos);
  EXPECT_NE(message("# nothing\n\n").find("names no kernel"), std::string::npos);
  EXPECT_NE(message("--cc 90 --m 64 --n 64\n").find("p.txt line 1: --m, --n and --k go together"), std::string::npos);
  EXPECT_NE(message("--cc 90 --m 0 --n 64 --k 64\n").find("--m must be at least 1"), std::string::npos);
  EXPECT_NE(message("--cc 90 --run-time-kernels --m 64 --n 64 --k 64\n").find("not both"), std::string::npos);
  EXPECT_THROW(read_pack_file("/nonexistent/pack.txt"), ConfigError);
  EXPECT_THROW(pack_specs("everything"), ConfigError);
}

TEST(Packs, TheDefaultsPackHoldsEachPlansKernelAndItsRunTimeChoices) {
  const auto specs = pack_specs("defaults");
  std::set<std::string> names;
  for (const auto& spec : specs) names.insert(spec.canonical());
  EXPECT_EQ(names.size(), specs.size());  // no kernel twice
  for (const int cc : {80, 90}) {
    const Gemm plan(testing_options(cc));
    for (const KernelSpec& spec : plan.run_time_kernels()) EXPECT_TRUE(names.count(spec.canonical())) << spec.name();
  }
  // Each SM90 plan's quick twin too (the lean epilogue): a first run with any activation or bias compiles nothing.
  for (const DataType element : {DataType::f16, DataType::bf16}) {
    GemmOptions o = testing_options(90, element);
    if (element == DataType::bf16) o.element_accumulator = DataType::f32;  // as the pack's bf16 plans (the nearest)
    Gemm plan(o);
    plan.set_activation(Activation::ReLU);
    const auto tiles = plan.tile_descriptions();
    const auto lean = std::find_if(tiles.begin(), tiles.end(), [&](const TileDescription& td) {
      return td.epilogue_schedule == EpilogueSchedule::Lean && td.threadblock_shape == tiles[0].threadblock_shape &&
             td.cluster_shape == tiles[0].cluster_shape;
    });
    ASSERT_NE(lean, tiles.end());
    plan.set_tile_description(*lean);
    EXPECT_TRUE(names.count(plan.spec().canonical())) << plan.spec().name();  // one kernel for every activation
  }
  // The SM90 plan's run-time choices include Stream-K (long K, wave quantization).
  const auto sm90 = Gemm(testing_options(90)).run_time_kernels();
  EXPECT_GE(sm90.size(), 2u);
  EXPECT_TRUE(std::any_of(sm90.begin(), sm90.end(),
                          [](const KernelSpec& s) { return s.tile.tile_scheduler == TileScheduler::StreamK; }));
  // f16, bf16, f32 on SIMT cores and f32 as tf32 on tensor cores, for both GPUs.
  for (const int cc : {80, 90}) {
    for (const auto& [element, opclass] : {std::pair{DataType::f16, OpClass::TensorOp},
                                           {DataType::bf16, OpClass::TensorOp},
                                           {DataType::f32, OpClass::Simt},
                                           {DataType::f32, OpClass::TensorOp}}) {
      EXPECT_TRUE(std::any_of(
          specs.begin(), specs.end(),
          [&](const KernelSpec& s) { return s.element_a == element && s.opclass == opclass && s.cc == cc; }))
          << to_string(element) << " " << to_string(opclass) << " sm" << cc;
    }
  }
}

// The walk-throughs (basic, epilogue, grouped) and the reference's 01_epilogue notebook compile nothing where the
// defaults pack is installed, and 00_basic_gemm only the configuration it draws at random: every activation of the
// row-major f16 plan at their 256^3 problem, with the f16 accumulator the notebook declares and the f32 one of the C++
// walk-through, the grouped plans (the MoE form's column-major B too), on both generations, the basic walk-through's
// second listed configuration and the notebook's 3xTF32 plan.
TEST(Packs, TheDefaultsPackHoldsWhatTheWalkThroughsRun) {
  std::set<std::string> names;
  for (const auto& spec : pack_specs("defaults")) names.insert(spec.canonical());
  for (const int cc : {80, 90}) {
    for (const DataType accumulator : {DataType::f16, DataType::f32}) {
      GemmOptions o = testing_options(cc);
      o.element_accumulator = accumulator;
      Gemm plan(o);
      for (const Activation activation : Gemm::activations()) {
        plan.set_activation(activation);
        const KernelSpec spec = plan.spec_for_problem(256, 256, 256);
        EXPECT_TRUE(names.count(spec.canonical())) << spec.name();
      }
    }
    for (const DataType element : {DataType::f16, DataType::bf16}) {
      for (const Layout b : {Layout::RowMajor, Layout::ColumnMajor}) {
        GemmOptions o = testing_options(cc, element);
        o.element_accumulator = DataType::f32;
        o.layout_b = b;
        const KernelSpec spec = GroupedGemm(o).spec();
        EXPECT_TRUE(names.count(spec.canonical())) << spec.name();
      }
    }
  }
  GemmOptions sm80_kernels = testing_options(90);
  sm80_kernels.element_accumulator = DataType::f32;
  sm80_kernels.kernel_cc = 80;
  EXPECT_TRUE(names.count(GroupedGemm(sm80_kernels).spec().canonical()));
  // The basic walk-through's compile of the second listed configuration, and 00_basic_gemm's 3xTF32 plan.
  for (const int cc : {80, 90}) {
    GemmOptions o = testing_options(cc);
    o.element_accumulator = DataType::f32;
    Gemm basic(o);
    basic.set_tile_description(basic.tile_descriptions().at(1));
    EXPECT_TRUE(names.count(basic.spec().canonical())) << basic.spec().name();
    GemmOptions f32 = testing_options(cc, DataType::f32);
    f32.element_accumulator = DataType::f32;
    Gemm precise(f32);
    precise.set_math_operation(MathOperation::MultiplyAddFastF32);
    const KernelSpec spec = precise.spec_for_problem(128, 128, 128);
    EXPECT_EQ(spec.tile.math_operation, MathOperation::MultiplyAddFastF32);
    EXPECT_TRUE(names.count(spec.canonical())) << spec.name();
  }
}

// The shape suite (the benchmark's and the tuner's problems) runs on the defaults pack with nothing to compile: every
// kernel run() picks for it on an SM90 16-bit row-major plan accumulating in f32, split-K and the odd extents' 2.x
// kernels included.
TEST(Packs, TheDefaultsPackHoldsWhatRunPicksForEveryShapeOfTheSuite) {
  std::set<std::string> names;
  for (const auto& spec : pack_specs("defaults")) names.insert(spec.canonical());
  std::set<std::string> kinds;
  for (const DataType element : {DataType::f16, DataType::bf16}) {
    GemmOptions o = testing_options(90, element);
    o.element_accumulator = DataType::f32;
    Gemm plan(o);
    for (const verify::SuiteShape& s : verify::shape_suite("", verify::SuiteGroups::WithOdd)) {
      const KernelSpec spec = plan.spec_for_problem(s.m, s.n, s.k);
      EXPECT_TRUE(names.count(spec.canonical())) << s.text() << " " << spec.name();
      kinds.insert(std::string(to_string(spec.split_k_mode)) + "/" + std::string(to_string(spec.family)));
    }
  }
  EXPECT_GE(kinds.size(), 3u);  // the suite reaches serial SM90 kernels, parallel split-K and the 2.x scalar-load ones
}

// gemmkit.torch.scaled_mm's FP8 plans (e4m3 to bf16 without C, with scale vectors or block scales) run the suite's
// problems whose rows FP8 can read with nothing to compile either.
TEST(Packs, TheDefaultsPackHoldsWhatScaledMmRunsOnTheSuite) {
  std::set<std::string> names;
  for (const auto& spec : pack_specs("defaults")) names.insert(spec.canonical());
  for (const BlockScaling blocks : {BlockScaling::None, BlockScaling::Blockwise}) {
    GemmOptions o = testing::fp8_tn(90);
    o.element_c = DataType::void_t;
    o.element_accumulator = DataType::f32;
    Gemm plan(o);
    if (blocks == BlockScaling::None) {
      plan.set_scale(ScaleMode::RowAndColumn);
    } else {
      plan.set_block_scaling(blocks);
    }
    std::size_t shapes = 0;
    for (const verify::SuiteShape& s : verify::shape_suite("", verify::SuiteGroups::WithOdd)) {
      if (s.k % 16 != 0 || s.n % 8 != 0) continue;  // FP8 and bf16 rows are 16-byte vectors
      const KernelSpec spec = plan.spec_for_problem(s.m, s.n, s.k);
      EXPECT_TRUE(names.count(spec.canonical())) << s.text() << " " << spec.name();
      ++shapes;
    }
    EXPECT_GE(shapes, 20u);
  }
}

// A note is for a choice made on the user's behalf: listing a pack declares plans the user did not, so it says
// nothing, and a note dropped in a quiet scope is still said later, outside one.
TEST(Packs, ListingThePackSaysNothingAndQuietNotesAreNotSpent) {
  std::vector<std::string> notes;
  set_note_handler([&](const std::string& message) { notes.push_back(message); });
  (void)pack_specs("defaults");
  EXPECT_TRUE(notes.empty()) << notes.front();
  {
    const QuietNotes quiet;
    note_once("a note from a quiet scope");
  }
  EXPECT_TRUE(notes.empty());
  note_once("a note from a quiet scope");
  note_once("a note from a quiet scope");
  set_note_handler({});
  EXPECT_EQ(notes, std::vector<std::string>{"a note from a quiet scope"});
}

// ---- interrupts ------------------------------------------------------------------------------------------------

// A fake CUDA toolkit whose nvcc answers --version and otherwise starts a child of its own (in its process group) and
// sleeps, writing both pids into `pids`.
class FakeNvcc {
 public:
  FakeNvcc() {
    fs::create_directories(dir_.path() / "bin");
    const fs::path nvcc = dir_.path() / "bin" / "nvcc";
    std::ofstream(nvcc) << "#!/bin/sh\n"
                           "if [ \"$1\" = --version ]; then\n"
                           "  echo 'Cuda compilation tools, release 12.8, V12.8.93'\n"
                           "  echo 'Build cuda_12.8.r12.8/compiler.35583870_0'\n"
                           "  exit 0\n"
                           "fi\n"
                           "touch \"$TMPDIR/tmpxft_fake.cpp\"\n"
                           "sleep 300 &\n"
                           "echo $$ $! > '"
                        << pids().string() << ".tmp' && mv '" << pids().string() << ".tmp' '" << pids().string()
                        << "'\n"
                           "wait\n";
    fs::permissions(nvcc, fs::perms::owner_all);
  }
  std::string home() const { return dir_.str(); }
  fs::path pids() const { return dir_.path() / "pids"; }
  Toolchain toolchain() const {
    Toolchain tc = fake_toolchain();
    tc.nvcc = (dir_.path() / "bin" / "nvcc").string();
    tc.cutlass_root = dir_.str();
    tc.device_include_dir = dir_.str();
    return tc;
  }
  // Waits until the fake nvcc runs; returns its pid and its child's.
  std::pair<pid_t, pid_t> wait_running() const {
    for (int i = 0; i < 3000 && !fs::exists(pids()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(pids());
    pid_t nvcc = 0, child = 0;
    in >> nvcc >> child;
    return {nvcc, child};
  }

 private:
  testenv::TempDir dir_;
};

bool gone(pid_t pid) {
  for (int i = 0; i < 300; ++i) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class InterruptTest : public ::testing::TestWithParam<int> {};

TEST_P(InterruptTest, StopsNvccsGroupRemovesTheBuildFolderAndSaysInterrupted) {
  const int sig = GetParam();
  FakeNvcc nvcc;
  testenv::TempDir cache_dir;
  DiskCache cache(cache_dir.str());
  const CacheCounters before = cache_counters();
  auto build = std::async(std::launch::async, [&] { return cache.get_or_build(nvcc.toolchain(), fake_source()); });
  const auto [nvcc_pid, child_pid] = nvcc.wait_running();
  ASSERT_GT(nvcc_pid, 0);
  ASSERT_GT(child_pid, 0);
  // The compile installs its handler before nvcc starts; see it here before signalling, so that a missing handler is
  // a failure to read rather than the test process's death.
  struct sigaction installed {};
  for (int i = 0; i < 500 && (sigaction(sig, nullptr, &installed), (installed.sa_flags & SA_SIGINFO) == 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(installed.sa_flags & SA_SIGINFO, 0) << "no gemmkit handler for the signal while nvcc runs";
  ::kill(::getpid(), sig);  // as the terminal's Ctrl-C or a `kill` would
  try {
    build.get();
    ADD_FAILURE() << "the build was not interrupted";
  } catch (const InterruptedError& e) {
    EXPECT_EQ(e.signal, sig);
    EXPECT_NE(std::string(e.what()).find("interrupted"), std::string::npos);
  }
  EXPECT_TRUE(gone(nvcc_pid));
  EXPECT_TRUE(gone(child_pid)) << "nvcc's child was left running";
  EXPECT_EQ(cache_counters().builds, before.builds);
  const fs::path tmp = cache_dir.path() / "v1" / "tmp";
  EXPECT_TRUE(!fs::exists(tmp) || fs::is_empty(tmp)) << "a build folder was left in " << tmp;
  // The handlers are gone with the compile: the default disposition is back.
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

INSTANTIATE_TEST_SUITE_P(Signals, InterruptTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) { return info.param == SIGINT ? "SIGINT" : "SIGTERM"; });

// The command line: exit 130 for SIGINT, 143 for SIGTERM, an "interrupted" message, nothing left behind.
TEST_P(InterruptTest, TheCliExitsWith128PlusTheSignal) {
  const int sig = GetParam();
  FakeNvcc nvcc;
  testenv::TempDir cache_dir;
  int err_pipe[2];
  ASSERT_EQ(pipe(err_pipe), 0);
  const pid_t cli = fork();
  if (cli == 0) {
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[0]);
    setenv("CUDA_HOME", nvcc.home().c_str(), 1);
    setenv("GEMMKIT_CACHE_DIR", cache_dir.str().c_str(), 1);
    execl(GEMMKIT_CLI_PATH, GEMMKIT_CLI_PATH, "compile", "--cc", "90", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(err_pipe[1]);
  const auto [nvcc_pid, child_pid] = nvcc.wait_running();
  ASSERT_GT(nvcc_pid, 0);
  ::kill(cli, sig);
  int status = 0;
  waitpid(cli, &status, 0);
  std::string err;
  char buffer[4096];
  for (ssize_t n; (n = read(err_pipe[0], buffer, sizeof buffer)) > 0;) err.append(buffer, static_cast<std::size_t>(n));
  close(err_pipe[0]);
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << err;
  EXPECT_NE(err.find("InterruptedError: interrupted"), std::string::npos) << err;
  EXPECT_TRUE(gone(nvcc_pid));
  EXPECT_TRUE(gone(child_pid));
  const fs::path tmp = cache_dir.path() / "v1" / "tmp";
  EXPECT_TRUE(!fs::exists(tmp) || fs::is_empty(tmp));
}

// A process that exits while a background build runs neither hangs nor leaves nvcc running.
TEST(BackgroundBuilds, ExitWithABuildInFlightStopsItsNvcc) {
  FakeNvcc nvcc;
  testenv::TempDir cache_dir;
  const pid_t child = fork();
  if (child == 0) {
    DiskCache cache(cache_dir.str());
    (void)jit::build_in_background(cache, nvcc.toolchain(), fake_source());
    nvcc.wait_running();
    std::exit(0);  // static destruction and the exit handlers run with the build in flight
  }
  const auto [nvcc_pid, child_pid] = nvcc.wait_running();
  ASSERT_GT(nvcc_pid, 0);
  int status = 0;
  for (int i = 0; i < 1000 && waitpid(child, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (::kill(child, 0) == 0 && waitpid(child, &status, WNOHANG) == 0) {
    ::kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the process did not exit within 10 s with a background build in flight";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_TRUE(gone(nvcc_pid));
  EXPECT_TRUE(gone(child_pid));
  const fs::path tmp = cache_dir.path() / "v1" / "tmp";
  EXPECT_TRUE(!fs::exists(tmp) || fs::is_empty(tmp));
}

// Build-ahead is off unless asked for (GEMMKIT_BUILD_AHEAD=1, or the Python package in an interactive session): a
// script or a test that declares plans starts no compile by declaring them.
TEST(BuildAhead, DeclaringAPlanStartsNoBuildByDefault) {
  testenv::TempDir dir;
  testenv::ScopedEnv cache("GEMMKIT_CACHE_DIR", dir.str());
  testenv::ScopedEnv ahead("GEMMKIT_BUILD_AHEAD", std::nullopt);
  const CacheCounters before = cache_counters();
  Gemm plan(testing::f16_row(90));
  Gemm other(testing::f16_row(80));
  jit::wait_for_background_builds();
  EXPECT_EQ(cache_counters().background_builds, before.background_builds);
  EXPECT_EQ(cache_counters().builds, before.builds);
  EXPECT_TRUE(DiskCache(dir.str()).list().empty());
}

}  // namespace
}  // namespace gemmkit
