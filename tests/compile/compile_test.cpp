// tests/compile/compile_test.cpp: nvcc really builds one SM80 and one SM90 kernel (and FP8 ones: scale vectors,
// gemmkit's overlapped promotion) into a fresh cache; the second request is a cache hit (counted, not timed), also
// from a fresh process; the module loads and names itself.
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <utility>

#include "gemmkit/cache.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "gemmkit/jit.hpp"
#include "gemmkit/packs.hpp"
#include "jit/process.hpp"
#include "runtime/kernel_module.hpp"
#include "support/cli.hpp"
#include "unit/test_env.hpp"

namespace gk = gemmkit;

using gk::testing::f16_row;

// A row-major m x n x k problem over one buffer (only host code reads the addresses), alpha 1.
gk_gemm_args packed_args(int m, int n, int k, void* buffer) {
  gk_gemm_args args{};
  args.m = m;
  args.n = n;
  args.k = k;
  args.batch = 1;
  args.A = args.B = args.D = buffer;
  args.lda = k;
  args.ldb = args.ldc = args.ldd = n;
  args.alpha = 1.0;
  return args;
}

// Builds `spec` into the cache at `cache_dir` and loads its module (with its cubin, where the build was split).
std::shared_ptr<gk::KernelModule> build_and_load(const std::string& cache_dir, const gk::KernelSpec& spec) {
  gk::DiskCache cache(cache_dir);
  const auto entry = cache.get_or_build(gk::Toolchain::discover(), gk::render(spec));
  return gk::KernelModule::load(entry.module_path, entry.cubin_path);
}

// Pins the plan to its first listed configuration that `wanted` accepts.
template <class Wanted>
void pin_tile(gk::Gemm& plan, Wanted wanted) {
  for (const gk::TileDescription& td : plan.tile_descriptions()) {
    if (wanted(td)) return plan.set_tile_description(td);
  }
  throw gk::ConfigError("the plan lists no configuration the test wants");
}

std::string run_cli(const std::string& cache_dir, const std::string& arguments) {
  return gk::testing::run_cli(arguments, cache_dir).out;
}

TEST(CompileTier, Sm80AndSm90KernelsBuildOnceThenHitTheCache) {
  gk::testenv::TempDir cache_dir;
  gk::testenv::ScopedEnv env("GEMMKIT_CACHE_DIR", cache_dir.str());
  gk::Gemm sm80(f16_row(80)), sm90(f16_row(90));

  // Both kernels at once, as many nvcc processes as memory allows.
  gk::DiskCache cache;
  const int builds_before = gk::cache_counters().builds;
  const auto entries =
      cache.get_or_build_many(gk::Toolchain::discover(), {gk::render(sm80.spec()), gk::render(sm90.spec())});
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_FALSE(entries[0].hit);
  EXPECT_FALSE(entries[1].hit);
  EXPECT_EQ(gk::cache_counters().builds, builds_before + 3);  // the SM90 kernel builds split: a cubin, a host module

  const auto again80 = sm80.compile();
  const auto again90 = sm90.compile();
  EXPECT_TRUE(again80.cache_hit);
  EXPECT_TRUE(again90.cache_hit);
  EXPECT_EQ(gk::cache_counters().builds, builds_before + 3);  // nvcc did not run again
  EXPECT_EQ(again90.module_path, entries[1].module_path);

  // The modules are loadable (no GPU needed for that) and speak our ABI.
  EXPECT_EQ(gk::KernelModule::load(again80.module_path)->kernel_name(), sm80.kernel_name());
  EXPECT_EQ(gk::KernelModule::load(again90.module_path, again90.cubin_path)->kernel_name(), sm90.kernel_name());

  // A fresh process finds the entry on disk.
  const auto json = nlohmann::ordered_json::parse(
      run_cli(cache_dir.str(), "compile --cc 90 --element f16 --element-accumulator f32 --layout row --json"));
  EXPECT_EQ(json.at("cache").get<std::string>(), "hit");
  EXPECT_EQ(json.at("kernel_name").get<std::string>(), sm90.kernel_name());
}

TEST(CompileTier, CompileErrorsCarryTheLogAndTheKeptSource) {
  gk::testenv::TempDir cache_dir;
  gk::KernelSource broken{"broken_kernel", "sm_80", "#include \"gemmkit/abi.h\"\nthis is not C++;\n"};
  gk::DiskCache cache(cache_dir.str());
  try {
    cache.get_or_build(gk::Toolchain::discover(), broken);
    FAIL() << "expected a CompileError";
  } catch (const gk::CompileError& e) {
    EXPECT_NE(e.exit_code, 0);
    EXPECT_NE(e.log.find("error"), std::string::npos) << e.log;
    EXPECT_TRUE(std::filesystem::exists(e.source_path)) << e.source_path;
    EXPECT_NE(std::string(e.what()).find("broken_kernel"), std::string::npos) << e.what();
  }
}

// The SM90 kernel (its activation compiled in, as GEMMKIT_ACTIVATION_AT_LAUNCH=0 builds it) is built on the split
// path (GEMMKIT_SPLIT_BUILD): a cubin entry and a host module entry, two nvcc processes at once; the host module loads
// with its cubin bound.
TEST(CompileTier, FusedEpilogueKernelsOfBothFamiliesBuild) {
  gk::testenv::TempDir cache_dir;
  gk::testenv::ScopedEnv split("GEMMKIT_SPLIT_BUILD", "1");
  gk::Gemm sm90(f16_row(90));
  sm90.set_activation_at_launch(false);
  sm90.set_activation(gk::Activation::GELU);
  sm90.set_bias(gk::BiasMode::PerRow);
  gk::GemmOptions sm80_options = f16_row(90);
  sm80_options.kernel_cc = 80;  // CUTLASS 2.x kernels built for the SM90 GPU
  gk::Gemm sm80(sm80_options);
  sm80.set_activation(gk::Activation::LeakyReLU);
  sm80.set_bias(gk::BiasMode::PerColumn);
  gk::DiskCache cache(cache_dir.str());
  const auto entries =
      cache.get_or_build_many(gk::Toolchain::discover(), {gk::render(sm90.spec()), gk::render(sm80.spec())});
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(gk::KernelModule::load(entries[0].module_path, entries[0].cubin_path)->kernel_name(), sm90.kernel_name());
  EXPECT_EQ(gk::KernelModule::load(entries[1].module_path)->kernel_name(), sm80.kernel_name());
  EXPECT_TRUE(entries[1].cubin_path.empty());  // SM80 kernels build in one pass

  // The split kernel: its cubin holds the kernel under the name the host module launches, the host module's manifest
  // names the cubin's key, and both entries are where their keys say.
  const gk::Toolchain& toolchain = gk::Toolchain::discover();
  const gk::KernelSource source = gk::render(sm90.spec());
  const std::string cubin_key = cache.split_key(toolchain, source, gk::SplitArtifact::cubin);
  EXPECT_EQ(entries[0].key, cache.split_key(toolchain, source, gk::SplitArtifact::host));
  ASSERT_TRUE(cache.lookup(cubin_key));
  EXPECT_EQ(cache.lookup(cubin_key)->module_path, entries[0].cubin_path);
  std::ifstream cubin(entries[0].cubin_path, std::ios::binary);
  const std::string image((std::istreambuf_iterator<char>(cubin)), std::istreambuf_iterator<char>());
  EXPECT_EQ(image.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_NE(image.find("gk_device_kernel"), std::string::npos);
  std::ifstream manifest(std::filesystem::path(entries[0].dir) / "manifest.json");
  EXPECT_EQ(nlohmann::ordered_json::parse(manifest).at("cubin_key").get<std::string>(), cubin_key);
  EXPECT_THROW(gk::KernelModule::load(entries[0].module_path, entries[0].dir + "/no.cubin"), gk::Error);
  const auto found = cache.find(toolchain, source);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cubin_path, entries[0].cubin_path);
  EXPECT_NE(sm90.kernel_name().find("_gelu_biasrow"), std::string::npos) << sm90.kernel_name();
  EXPECT_NE(sm80.kernel_name().find("_leaky_relu_biascolumn"), std::string::npos) << sm80.kernel_name();
}

// A plan's default kernel on CUTLASS's TMA epilogue takes its activation at launch: it builds (split), and a plan of
// another activation finds it in the cache instead of building one of its own. With an f16 accumulator, as the
// reference's epilogue notebook declares, the epilogue computes in f16 and the launch's f32 leaky_relu slope converts.
TEST(CompileTier, ActivationAtLaunchKernelBuildsOnceForEveryActivation) {
  gk::testenv::TempDir cache_dir;
  gk::testenv::ScopedEnv env("GEMMKIT_CACHE_DIR", cache_dir.str());
  gk::testenv::ScopedEnv by_default("GEMMKIT_ACTIVATION_AT_LAUNCH", std::nullopt);
  gk::GemmOptions f16_accumulator = f16_row(90);
  f16_accumulator.element_accumulator = gk::DataType::f16;
  gk::Gemm plan(f16_accumulator);
  plan.set_activation(gk::Activation::SiLU);
  plan.set_bias(gk::BiasMode::PerColumn);
  EXPECT_NE(plan.kernel_name().find("_act_at_launch_biascolumn"), std::string::npos) << plan.kernel_name();
  const gk::CompiledKernel kernel = plan.compile();
  EXPECT_FALSE(kernel.cache_hit);
  EXPECT_EQ(gk::KernelModule::load(kernel.module_path, kernel.cubin_path)->kernel_name(), plan.kernel_name());
  const int builds = gk::cache_counters().builds;
  gk::Gemm other(f16_accumulator);
  other.set_activation(gk::Activation::LeakyReLU, 0.2);
  other.set_bias(gk::BiasMode::PerColumn);
  const gk::CompiledKernel again = other.compile();
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(again.module_path, kernel.module_path);
  EXPECT_EQ(gk::cache_counters().builds, builds);
}

// gemmkit's lean epilogue builds (split: cubin and host module); its kernel takes the activation and bias at launch (a
// plan without them names the same kernel) and refuses, before anything runs, a bias mode without a bias and a D whose
// rows are not 16-byte aligned.
TEST(CompileTier, LeanEpilogueKernelBuildsAndChecksItsLaunchEpilogue) {
  gk::testenv::TempDir cache_dir;
  gk::Gemm plan(f16_row(90));
  gk::TileDescription tile = plan.tile_descriptions().front();
  tile.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  tile.epilogue_schedule = gk::EpilogueSchedule::Lean;
  plan.set_tile_description(tile);
  const std::string plain = plan.kernel_name();
  plan.set_activation(gk::Activation::GELU);
  plan.set_bias(gk::BiasMode::PerRow);
  EXPECT_EQ(plan.kernel_name(), plain);
  EXPECT_NE(plain.find("_epi_lean"), std::string::npos) << plain;
  gk::DiskCache cache(cache_dir.str());
  const auto entry = cache.get_or_build(gk::Toolchain::discover(), gk::render(plan.spec()));
  ASSERT_FALSE(entry.cubin_path.empty());  // the split build
  const auto module = gk::KernelModule::load(entry.module_path, entry.cubin_path);
  EXPECT_EQ(module->kernel_name(), plain);
  alignas(256) static char buffer[256];
  gk_gemm_args args = packed_args(64, 64, 64, buffer);
  args.activation = GK_ACTIVATION_GELU;
  args.bias_mode = GK_BIAS_PER_ROW;
  EXPECT_EQ(module->can_implement(args), GK_ERR_ARGS);  // a bias mode needs its vector
  args.bias = buffer;
  EXPECT_EQ(module->can_implement(args), GK_OK);
  args.ldd = 60;  // the epilogue stores D in 16-byte vectors
  EXPECT_EQ(module->can_implement(args), GK_ERR_CANNOT_IMPLEMENT);
}

// An epilogue visitor tree (a DAG with an aux load, a column broadcast, a store and a row reduction) builds on both
// generations, and the modules check its operands: a launch without them is refused before anything runs.
TEST(CompileTier, VisitorTreeKernelsOfBothFamiliesBuildAndCheckTheirOperands) {
  using namespace gk::epilogue;
  gk::testenv::TempDir cache_dir;
  Expr F = store(scalar("alpha") * acc() + aux("aux"), "F");
  const Epilogue tree(relu(F + 1.0) + column_broadcast("bias") + F, {row_reduction(F, "F_max", ReduceOp::Max)});
  gk::Gemm sm90(f16_row(90));
  sm90.set_epilogue_visitor(tree);
  gk::GemmOptions sm80_options = f16_row(90);
  sm80_options.kernel_cc = 80;
  gk::Gemm sm80(sm80_options);
  sm80.set_epilogue_visitor(tree);
  gk::DiskCache cache(cache_dir.str());
  const auto entries =
      cache.get_or_build_many(gk::Toolchain::discover(), {gk::render(sm90.spec()), gk::render(sm80.spec())});
  ASSERT_EQ(entries.size(), 2u);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto module = gk::KernelModule::load(entries[i].module_path, entries[i].cubin_path);
    EXPECT_EQ(module->kernel_name(), (i == 0 ? sm90 : sm80).kernel_name());
    gk_gemm_args args{};
    args.m = args.n = args.k = 64;
    args.batch = 1;
    int dummy = 0;
    args.A = args.B = args.D = &dummy;
    EXPECT_EQ(module->can_implement(args), GK_ERR_ARGS);  // no visitor operands
  }
}

// FP8 (e4m3 x e5m2 -> bf16) with per-row and per-column scale vectors: CUTLASS's FP8 mainloop (what the heuristics
// run for Stream-K, split-K and the tiles gemmkit's loops lack) and the scaled epilogue visitor tree build for a plan
// without C, the module names itself and takes a problem.
TEST(CompileTier, Fp8Sm90KernelWithScaleVectorsBuilds) {
  gk::testenv::TempDir cache_dir;
  gk::GemmOptions o = gk::testing::fp8_tn(90);
  o.element_b = gk::DataType::e5m2;
  o.element_c = gk::DataType::void_t;  // a plan without C: CUTLASS's epilogue with no source operand
  gk::Gemm plan(o);
  plan.set_scale(gk::ScaleMode::RowAndColumn);
  pin_tile(plan, [](const gk::TileDescription& td) { return td.kernel_schedule == gk::KernelSchedule::Auto; });
  ASSERT_TRUE(plan.kernel_name().ends_with("_256x192x128_2x1x1_0_tnt_align16_scalerowcolumn")) << plan.kernel_name();
  const auto module = build_and_load(cache_dir.str(), plan.spec());
  EXPECT_EQ(module->kernel_name(), plan.kernel_name());
  EXPECT_NE(plan.kernel_name().find("_e4m3_e5m2_f32_void_bf16_"), std::string::npos) << plan.kernel_name();
  alignas(256) static char buffer[256];
  gk_gemm_args args = packed_args(256, 384, 512, buffer);
  args.ldb = 512;  // B column-major
  args.row_scale = args.column_scale = buffer;
  EXPECT_EQ(module->can_implement(args), GK_OK);
}

// The N-split cooperative kernel (192 x 160 tiles, the warp groups splitting N, an N-major B) with a fused ReLU and
// column bias builds from gemmkit's own collective assembly, loads, and takes a problem of ragged extents.
TEST(CompileTier, SplitNCooperativeKernelBuildsAndTakesAProblem) {
  gk::testenv::TempDir cache_dir;
  gk::Gemm plan(f16_row(90));
  plan.set_activation(gk::Activation::ReLU);
  plan.set_bias(gk::BiasMode::PerColumn);
  pin_tile(plan, [](const gk::TileDescription& td) {
    return td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedCooperativeSplitN && td.cta_tile()[1] == 160;
  });
  ASSERT_NE(plan.kernel_name().find("192x160x64_1x1x1_0_ttt_align8_warpspecialized_cooperative_splitn"),
            std::string::npos)
      << plan.kernel_name();
  const auto module = build_and_load(cache_dir.str(), plan.spec());
  EXPECT_EQ(module->kernel_name(), plan.kernel_name());
  alignas(256) static char buffer[256];
  gk_gemm_args args = packed_args(2400, 3232, 4096, buffer);
  args.bias = buffer;
  EXPECT_EQ(module->can_implement(args), GK_OK);
}

// What ptxas says of `spec`'s cubin pass (`-Xptxas -v`), compiled in `dir`/cubin. With `module`, the host module is
// built beside it (`dir`/host) as the split build does, and the two are loaded into *module: one nvcc pass each.
std::string ptxas_report(const gk::KernelSpec& spec, const std::filesystem::path& dir,
                         std::shared_ptr<gk::KernelModule>* module = nullptr) {
  const gk::Toolchain toolchain = gk::Toolchain::discover();
  const gk::KernelSource source = gk::render(spec);
  const std::filesystem::path cubin_dir = dir / "cubin", host_dir = dir / "host";
  std::future<void> host;
  if (module) {
    host = std::async(std::launch::async,
                      [&] { gk::compile_split(toolchain, source, gk::SplitArtifact::host, host_dir.string()); });
  }
  std::filesystem::create_directories(cubin_dir);
  const std::string source_path = (cubin_dir / "kernel.cu").string();
  std::ofstream(source_path) << source.text;
  std::vector<std::string> argv = gk::split_command(toolchain, source, gk::SplitArtifact::cubin, source_path,
                                                    (cubin_dir / "kernel.cubin").string());
  argv.insert(argv.end(), {"-Xptxas", "-v"});
  const gk::ProcessResult result = gk::run_process(argv);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  if (module) {
    host.get();
    *module = gk::KernelModule::load((host_dir / "kernel.so").string(), (cubin_dir / "kernel.cubin").string());
  }
  return result.output;
}

// gemmkit's FP8 mainloops with the promotion overlapped: the column halves on the default tile (128 x 192 in a 2x1
// cluster, with row and column scales) build, load and take a problem; and ptxas keeps the GMMAs of both loops (that
// one, and alternating K tiles in the ping-pong kernel) asynchronous and unspilled. Partials read while another batch
// runs, in a place ptxas cannot follow, make it serialize every GMMA of the kernel (its info C7514), which only
// `-Xptxas -v` shows: the kernel would still be exact, and slower than CUTLASS's.
TEST(CompileTier, Fp8OverlappedPromotionKernelsBuildWithAsynchronousGmmas) {
  gk::testenv::TempDir build_dir;
  gk::Gemm plan(gk::testing::fp8_tn(90));
  plan.set_scale(gk::ScaleMode::RowAndColumn);
  pin_tile(plan, [](const gk::TileDescription& td) {
    return td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedCooperativeFP8Overlap && td.cta_tile()[1] == 192;
  });
  // The first such configuration, 128 x 192 in a 2x1 cluster: the plan's default.
  EXPECT_TRUE(
      plan.kernel_name().ends_with("256x192x128_2x1x1_0_tnt_align16_warpspecialized_cooperative_fp8overlap_epi_"
                                   "tma_scalerowcolumn"))
      << plan.kernel_name();
  gk::Gemm alternating(gk::testing::fp8_tn(90));
  pin_tile(alternating, [](const gk::TileDescription& td) {
    return td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedPingpongFP8AlternatingPromotion &&
           td.cluster_shape == gk::Shape3{1, 1, 1};
  });

  std::shared_ptr<gk::KernelModule> module;
  const std::pair<std::string, std::string> reports[] = {
      {plan.kernel_name(), ptxas_report(plan.spec(), build_dir.path() / "halves", &module)},
      {alternating.kernel_name(), ptxas_report(alternating.spec(), build_dir.path() / "alternating")}};
  for (const auto& [kernel, report] : reports) {
    EXPECT_EQ(report.find("serialized"), std::string::npos) << kernel << "\n" << report;
    EXPECT_NE(report.find(" 0 bytes spill stores"), std::string::npos) << kernel << "\n" << report;
  }
  ASSERT_TRUE(module);
  EXPECT_EQ(module->kernel_name(), plan.kernel_name());
  alignas(256) static char buffer[256];
  gk_gemm_args args = packed_args(2400, 3232, 4096, buffer);
  args.ldb = args.k;  // B is column-major
  args.row_scale = args.column_scale = buffer;
  EXPECT_EQ(module->can_implement(args), GK_OK);
}

// A block-scaled FP8 GEMM (DeepSeek-V3's 1 x 128 / 128 x 128 scales) with a fused ReLU builds on CUTLASS's blockwise
// mainloop, and its module checks the scales: a launch without both is refused, and A's scales, which load with TMA,
// need M to be a multiple of 4.
TEST(CompileTier, Fp8Sm90BlockScaledKernelBuildsAndChecksItsScales) {
  gk::testenv::TempDir cache_dir;
  gk::Gemm plan(gk::testing::fp8_tn(90));
  plan.set_block_scaling(gk::BlockScaling::Blockwise);
  plan.set_activation(gk::Activation::ReLU);
  EXPECT_NE(plan.kernel_name().find("_relu_blockwise"), std::string::npos) << plan.kernel_name();
  const auto module = build_and_load(cache_dir.str(), plan.spec());
  EXPECT_EQ(module->kernel_name(), plan.kernel_name());
  alignas(256) static char buffer[256];
  gk_gemm_args args = packed_args(256, 256, 256, buffer);
  EXPECT_EQ(module->can_implement(args), GK_ERR_ARGS);  // no scales
  args.row_scale = args.column_scale = buffer;
  EXPECT_EQ(module->can_implement(args), GK_OK);
  args.m = 254;
  EXPECT_EQ(module->can_implement(args), GK_ERR_CANNOT_IMPLEMENT);
}

// Parallel split-K on the block-scaled mainloop: the partial-sums GEMM takes the block scales (its slices start on K
// blocks) and the reduction applies none. It builds, names itself, and its module checks the scales as the
// unsplit one does; the workspace holds a slice of f32 partial sums per split.
TEST(CompileTier, Fp8Sm90BlockScaledParallelSplitKKernelBuildsAndChecksItsScales) {
  gk::testenv::TempDir cache_dir;
  gk::Gemm plan(gk::testing::fp8_tn(90));
  plan.set_block_scaling(gk::BlockScaling::Blockwise);
  gk::KernelSpec spec = plan.spec();
  spec.split_k_mode = gk::SplitKMode::Parallel;
  EXPECT_NE(spec.name().find("_blockwise"), std::string::npos) << spec.name();
  EXPECT_NE(spec.name().find("_splitk_parallel"), std::string::npos) << spec.name();
  const auto module = build_and_load(cache_dir.str(), spec);
  EXPECT_EQ(module->kernel_name(), spec.name());
  alignas(256) static char buffer[256];
  gk_gemm_args args = packed_args(256, 256, 1024, buffer);
  args.ldb = args.k;  // B is column-major
  args.sm_count = 132;
  args.splits = 4;
  EXPECT_EQ(module->can_implement(args), GK_ERR_ARGS);  // no scales
  args.row_scale = args.column_scale = buffer;
  EXPECT_EQ(module->can_implement(args), GK_OK);
  EXPECT_GE(module->workspace_size(args), std::size_t{4} * 256 * 256 * sizeof(float));
}

// FP8 with fast accumulation (CUTLASS's FP8FastAccum schedule, its TMA epilogue named by gemmkit) builds and names
// itself.
TEST(CompileTier, Fp8Sm90FastAccumulationKernelBuilds) {
  gk::testenv::TempDir cache_dir;
  gk::Gemm plan(gk::testing::fp8_tn(90));
  plan.set_math_operation(gk::MathOperation::MultiplyAddFastAccum);
  EXPECT_TRUE(plan.kernel_name().ends_with("_fp8_fastaccum")) << plan.kernel_name();
  EXPECT_EQ(build_and_load(cache_dir.str(), plan.spec())->kernel_name(), plan.kernel_name());
}

// The SM90 split-K kernel of the gpu tier (Stream-K scheduler, fused ReLU) builds; its host code (no GPU) reads the
// decomposition and split count from the ABI: split-K 4 needs a workspace for the partial tiles, a data-parallel
// launch of the same kernel none of that size, and CUTLASS refuses a split count with a Stream-K decomposition.
TEST(CompileTier, Sm90SplitKKernelBuildsAndReadsItsDecompositionAtRunTime) {
  gk::testenv::TempDir cache_dir;
  gk::Gemm plan(f16_row(90));
  plan.set_activation(gk::Activation::ReLU);
  plan.set_split_k_slices(2);
  alignas(256) static char base[256];
  auto view = [&](long rows, long cols) {
    return gk::TensorView::on_gpu(base, gk::DataType::f16, {rows, cols}, gk::Layout::RowMajor, 0);
  };
  const long m = 256, n = 384, k = 2392;  // tests/support/gpu_cases.hpp kSplitKShape
  const gk::KernelSpec spec = plan.spec_for(view(m, k), view(k, n), nullptr, view(m, n));
  EXPECT_NE(spec.name().find("_stream_k"), std::string::npos) << spec.name();
  gk::DiskCache cache(cache_dir.str());
  const auto entries = cache.get_or_build_many(gk::Toolchain::discover(), {gk::render(spec)});
  ASSERT_EQ(entries.size(), 1u);
  const auto module = gk::KernelModule::load(entries[0].module_path);
  gk_gemm_args args = packed_args(m, n, k, base);
  args.C = base;
  args.beta = 1.0;
  args.sm_count = 132;
  args.splits = 4;
  args.decomposition = 2;  // split-K
  const std::size_t split_k = module->workspace_size(args);
  EXPECT_EQ(module->can_implement(args), GK_OK);
  args.splits = 1;
  args.decomposition = 1;  // data-parallel
  const std::size_t data_parallel = module->workspace_size(args);
  EXPECT_GE(split_k, data_parallel + std::size_t{m} * n * sizeof(float)) << split_k << " vs " << data_parallel;
  args.splits = 4;
  args.decomposition = 3;  // Stream-K takes no split count
  EXPECT_EQ(module->can_implement(args), GK_ERR_CANNOT_IMPLEMENT);
}

// One grouped kernel of each family: the modules build, load as grouped modules and describe what they compiled.
TEST(CompileTier, GroupedKernelsOfBothFamiliesBuildAndDescribeThemselves) {
  gk::testenv::TempDir cache_dir;
  gk::GroupedGemm sm90(f16_row(90));
  gk::GemmOptions sm80_options = f16_row(90);
  sm80_options.kernel_cc = 80;
  gk::GroupedGemm sm80(sm80_options);
  sm80.set_activation(gk::Activation::ReLU);
  gk::DiskCache cache(cache_dir.str());
  const auto entries =
      cache.get_or_build_many(gk::Toolchain::discover(), {gk::render(sm90.spec()), gk::render(sm80.spec())});
  ASSERT_EQ(entries.size(), 2u);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto module = gk::KernelModule::load(entries[i].module_path);
    EXPECT_TRUE(module->grouped());
    EXPECT_EQ(module->kernel_name(), (i == 0 ? sm90 : sm80).kernel_name());
    const gk_grouped_info& info = module->grouped_info();
    EXPECT_EQ(info.element_a, GK_DTYPE_F16);
    EXPECT_EQ(info.alignment_a, 8);
    EXPECT_EQ(std::string(info.activation), i == 0 ? "identity" : "relu");
    EXPECT_GT(module->grouped_metadata_bytes(50), 50u * 3 * sizeof(int));
  }
}

// The MoE form's block-scaled FP8 kernel (CUTLASS's ptr-array blockwise mainloop) builds on the split path, says it
// needs block scales, and its host code (no GPU) refuses a contiguous problem without them or with a misaligned one.
TEST(CompileTier, GroupedFp8BlockScaledKernelBuildsAndChecksItsScales) {
  gk::testenv::TempDir cache_dir;
  gk::GroupedGemm plan(gk::testing::fp8_tn(90));
  plan.set_block_scaling(gk::BlockScaling::Blockwise);
  const auto module = build_and_load(cache_dir.str(), plan.spec());
  ASSERT_TRUE(module->grouped());
  EXPECT_EQ(module->kernel_name(), plan.kernel_name());
  const gk_grouped_info& info = module->grouped_info();
  EXPECT_EQ(info.element_a, GK_DTYPE_E4M3);
  EXPECT_EQ(info.element_d, GK_DTYPE_BF16);
  EXPECT_EQ(info.block_scaled, 1);
  EXPECT_EQ(info.contiguous, 1);
  alignas(256) static char buffer[256];
  gk_grouped_args args{};
  args.groups = 4;
  args.alpha = 1.0;
  gk_grouped_contiguous problem{};
  problem.total_m = 512;
  problem.n = problem.k = 256;
  problem.A = problem.B = problem.D = buffer;
  problem.offsets = reinterpret_cast<const std::int32_t*>(buffer);
  problem.lda = problem.ldb = problem.ldd = 256;
  problem.batch_stride_b = 256 * 256;
  EXPECT_EQ(module->grouped_can_implement(args, &problem), GK_ERR_ARGS);  // no scales
  problem.scale_a = problem.scale_b = reinterpret_cast<const float*>(buffer);
  EXPECT_EQ(module->grouped_can_implement(args, &problem), GK_OK);
  problem.scale_b = reinterpret_cast<const float*>(buffer + 2);
  EXPECT_EQ(module->grouped_can_implement(args, &problem), GK_ERR_CANNOT_IMPLEMENT);
}

// A convolution of n x hw x hw x c by k filters of r x r (r odd), padded to keep the size, at fake addresses (only
// host code reads them).
gk_conv2d_args same_size_conv_args(int n, int hw, int c, int k, int r) {
  alignas(128) static char buffer[128];  // TMA descriptors need 16-byte aligned bases
  gk_conv2d_args args{};
  args.n = n, args.h = args.w = args.p = args.q = hw, args.c = c, args.k = k, args.r = args.s = r;
  args.pad_h = args.pad_w = r / 2;
  args.stride_h = args.stride_w = args.dilation_h = args.dilation_w = 1;
  args.split_k_slices = 1;
  args.A = args.B = args.D = buffer;
  args.alpha = 1.0;
  return args;
}

// One conv kernel (SM80 fprop f16, the optimized kernel run() picks for ResNet-like layers), built through the CLI
// into a fresh cache; the module is a Conv2d module, and its can_implement (host code, no GPU) takes a problem whose
// channels fit its vectors and refuses one whose channels do not.
TEST(CompileTier, Conv2dFpropKernelBuildsAndChecksProblems) {
  gk::testenv::TempDir cache_dir;
  gk::testenv::ScopedEnv env("GEMMKIT_CACHE_DIR", cache_dir.str());
  const auto json =
      nlohmann::ordered_json::parse(run_cli(cache_dir.str(),
                                            "compile --conv fprop --cc 80 --element f16 --element-accumulator f32 "
                                            "--batch 1 --height 56 --width 56 --channels 64 --out-channels 64 "
                                            "--filter-height 3 --filter-width 3 --pad 1 --json"));
  EXPECT_EQ(json.at("kernel_name").get<std::string>(),
            "cutlass_sm80_tensorop_f16_s16x8x16fprop_optimized_f16_256x128_64x3_nhwc_align8");
  const auto module = gk::KernelModule::load(json.at("module_path").get<std::string>());
  EXPECT_TRUE(module->conv2d());
  EXPECT_FALSE(module->grouped());
  gk_conv2d_args args = same_size_conv_args(1, 56, 64, 64, 3);
  EXPECT_EQ(module->conv2d_can_implement(args), GK_OK);
  args.c = 12;  // not a multiple of the 8-element vectors the kernel reads
  EXPECT_EQ(module->conv2d_can_implement(args), GK_ERR_CANNOT_IMPLEMENT);
  args.A = nullptr;
  EXPECT_EQ(module->conv2d_can_implement(args), GK_ERR_ARGS);
}

// The SM90 conv family's kernel (fprop f16, CUTLASS 3.x ConvUniversal with TMA im2col: the default on SM90), built
// through the CLI into a fresh cache: res2's 3x3 64 -> 64, a short reduction (9 K steps), so at 4 stages; its
// can_implement (host code, no GPU) takes a problem that TMA im2col addresses and refuses channels that are not
// 16-byte vectors and a padding past its corner range.
TEST(CompileTier, Sm90Conv2dFpropKernelBuildsAndChecksProblems) {
  gk::testenv::TempDir cache_dir;
  gk::testenv::ScopedEnv env("GEMMKIT_CACHE_DIR", cache_dir.str());
  const auto json =
      nlohmann::ordered_json::parse(run_cli(cache_dir.str(),
                                            "compile --conv fprop --cc 90 --element f16 --element-accumulator f32 "
                                            "--batch 1 --height 56 --width 56 --channels 64 --out-channels 64 "
                                            "--filter-height 3 --filter-width 3 --pad 1 --json"));
  EXPECT_EQ(json.at("kernel_name").get<std::string>(),
            "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_128x128x64_1x1x1_4_align8_warpspecialized_"
            "epi_tma");
  const auto module = gk::KernelModule::load(json.at("module_path").get<std::string>());
  EXPECT_TRUE(module->conv2d());
  gk_conv2d_args args = same_size_conv_args(1, 56, 64, 64, 3);
  EXPECT_EQ(module->conv2d_can_implement(args), GK_OK);
  args.c = 12;  // TMA moves 16-byte channel vectors: 8 f16
  EXPECT_EQ(module->conv2d_can_implement(args), GK_ERR_CANNOT_IMPLEMENT);
  args.c = 64;
  args.pad_h = 200, args.p = 454;  // the im2col box's lower corner at -200, past [-128, 127]
  EXPECT_EQ(module->conv2d_can_implement(args), GK_ERR_CANNOT_IMPLEMENT);
}

// The parallel split-K wgrad kernel (conv + reduction in one module), built through the CLI: its workspace holds one
// f32 partial sum per element of dw (K x R*S*C) per slice, for any slice count at run time.
TEST(CompileTier, Conv2dParallelSplitKWgradKernelBuildsAndSizesItsWorkspace) {
  gk::testenv::TempDir cache_dir;
  gk::testenv::ScopedEnv env("GEMMKIT_CACHE_DIR", cache_dir.str());
  const auto json = nlohmann::ordered_json::parse(
      run_cli(cache_dir.str(),
              "compile --conv wgrad --cc 80 --element f16 --element-accumulator f32 --batch 8 --height 28 --width 28 "
              "--channels 64 --out-channels 64 "
              "--filter-height 3 --filter-width 3 --pad 1 --split-k-mode parallel --split-k-slices 4 --json"));
  const std::string name = json.at("kernel_name").get<std::string>();
  EXPECT_EQ(name.substr(name.size() - 16), "_splitk_parallel") << name;
  EXPECT_NE(name.find("wgrad_optimized"), std::string::npos) << name;
  const auto module = gk::KernelModule::load(json.at("module_path").get<std::string>());
  EXPECT_TRUE(module->conv2d());
  gk_conv2d_args args = same_size_conv_args(8, 28, 64, 64, 3);
  for (int slices : {4, 7, 1}) {
    args.split_k_slices = slices;
    EXPECT_EQ(module->conv2d_can_implement(args), GK_OK);
    EXPECT_EQ(module->conv2d_workspace_size(args), std::size_t(slices) * 64 * (3 * 3 * 64) * sizeof(float));
  }
  args.c = 12;  // not a multiple of the 8-element vectors
  EXPECT_EQ(module->conv2d_can_implement(args), GK_ERR_CANNOT_IMPLEMENT);
}

// A pack of one kernel: prebuilt into the shared cache (a hit there after the first run anywhere), exported, imported
// into a fresh cache, and loaded from it with no compile at all.
TEST(CompileTier, APackMovesToAFreshCacheAndLoadsWithoutACompile) {
  gk::testenv::TempDir work;
  const std::string pack = (work.path() / "app.pack").string();
  std::ofstream(pack) << "# the app's one kernel\n--cc 80 --element f16 --element-accumulator f32 --layout row\n";
  const auto specs = gk::read_pack_file(pack);
  ASSERT_EQ(specs.size(), 1u);

  const auto prebuilt = gk::testing::run_cli("prebuild --pack-file " + pack + " --json");  // the shared cache
  ASSERT_EQ(prebuilt.status, 0) << prebuilt.out;
  EXPECT_EQ(nlohmann::ordered_json::parse(prebuilt.out).at("kernels").get<int>(), 1);
  const std::string archive = (work.path() / "app.tar").string();
  const auto exported = gk::testing::run_cli("cache export " + archive + " --pack-file " + pack + " --json");
  ASSERT_EQ(exported.status, 0) << exported.out;
  EXPECT_EQ(nlohmann::ordered_json::parse(exported.out).at("exported").get<int>(), 1);

  gk::testenv::TempDir fresh;
  const auto imported = gk::testing::run_cli("cache import " + archive + " --json", fresh.str());
  ASSERT_EQ(imported.status, 0) << imported.out;
  EXPECT_EQ(nlohmann::ordered_json::parse(imported.out).at("imported").get<int>(), 1);

  gk::testenv::ScopedEnv env("GEMMKIT_CACHE_DIR", fresh.str());
  const int builds_before = gk::cache_counters().builds;
  const gk::CompiledKernel kernel = gk::build_kernel(specs[0]);
  EXPECT_TRUE(kernel.cache_hit);
  EXPECT_EQ(gk::cache_counters().builds, builds_before);  // zero compiles
  EXPECT_EQ(gk::KernelModule::load(kernel.module_path)->kernel_name(), specs[0].name());
}

// GEMMKIT_BUILD_AHEAD=1: declaring a plan starts its default kernel's build in the background (no GPU needed), once
// per kernel; the plan's compile() then finds it built.
TEST(CompileTier, BuildAheadStartsTheDefaultKernelWhenAPlanIsDeclared) {
  gk::testenv::TempDir cache_dir;
  gk::testenv::ScopedEnv cache("GEMMKIT_CACHE_DIR", cache_dir.str());
  gk::testenv::ScopedEnv ahead("GEMMKIT_BUILD_AHEAD", "1");
  const gk::CacheCounters before = gk::cache_counters();
  gk::Gemm plan(f16_row(80));
  gk::Gemm same(f16_row(80));  // the build already under way: not queued twice
  gk::wait_for_background_compiles();
  EXPECT_EQ(gk::cache_counters().background_builds, before.background_builds + 1);
  const gk::CompiledKernel kernel = plan.compile();
  EXPECT_TRUE(kernel.cache_hit);
  EXPECT_EQ(gk::cache_counters().builds, before.builds + 1);
  gk::Gemm later(f16_row(80));  // built: nothing to start
  gk::wait_for_background_compiles();
  EXPECT_EQ(gk::cache_counters().background_builds, before.background_builds + 1);
  // The plans gemmkit makes for itself (here a pack file's) are no declarations: nothing starts for them.
  const std::string pack = (cache_dir.path() / "other.pack").string();
  std::ofstream(pack) << "--cc 80 --element bf16 --element-accumulator f32 --layout row\n";
  EXPECT_EQ(gk::read_pack_file(pack).size(), 1u);
  gk::wait_for_background_compiles();
  EXPECT_EQ(gk::cache_counters().background_builds, before.background_builds + 1);
}

// A pack beside the library (what -DGEMMKIT_PACK installs as share/gemmkit/packs/<name>; in the build tree,
// build/packs/<name>) serves an empty cache: the kernel loads from the pack, with zero compiles and nothing written.
TEST(CompileTier, APackBesideTheLibraryServesAnEmptyCache) {
  gk::testenv::TempDir work;
  const std::string pack_file = (work.path() / "one.pack").string();
  std::ofstream(pack_file) << "--cc 80 --element f16 --element-accumulator f32 --layout row\n";
  const std::filesystem::path pack =
      std::filesystem::path(GEMMKIT_CLI_PATH).parent_path() / "packs" / ("compile-test-" + std::to_string(::getpid()));
  struct Remove {
    std::filesystem::path dir;
    ~Remove() { std::filesystem::remove_all(dir); }
  } remove{pack};
  // The pack's kernel comes from the shared cache (built there once, by this test or the one above).
  const auto prebuilt = gk::testing::run_cli("prebuild --pack-file " + pack_file + " --json");
  ASSERT_EQ(prebuilt.status, 0) << prebuilt.out;
  const std::string archive = (work.path() / "one.tar").string();
  ASSERT_EQ(gk::testing::run_cli("cache export " + archive + " --pack-file " + pack_file).status, 0);
  ASSERT_EQ(gk::testing::run_cli("cache import " + archive, pack.string()).status, 0);

  gk::testenv::TempDir fresh;
  gk::testenv::ScopedEnv env("GEMMKIT_CACHE_DIR", fresh.str());
  const auto roots = gk::DiskCache::pack_roots();
  ASSERT_NE(std::find(roots.begin(), roots.end(), pack.string()), roots.end());
  const int builds_before = gk::cache_counters().builds;
  const int pack_hits_before = gk::cache_counters().pack_hits;
  const gk::CompiledKernel kernel = gk::build_kernel(gk::read_pack_file(pack_file).at(0));
  EXPECT_TRUE(kernel.cache_hit);
  EXPECT_EQ(gk::cache_counters().builds, builds_before);
  EXPECT_EQ(gk::cache_counters().pack_hits, pack_hits_before + 1);
  EXPECT_EQ(kernel.module_path.rfind(pack.string(), 0), 0u) << kernel.module_path;
  EXPECT_TRUE(gk::DiskCache(fresh.str()).list().empty());
  EXPECT_NE(run_cli(fresh.str(), "cache info").find("pack " + pack.string() + ": 1 entries"), std::string::npos);
}

// A build machine compiles the tuner's candidates for a GPU machine and lists each one's cache key (what
// tools/dev/carry-cache --keys copies); the listed key is the entry a later compile of that kernel finds.
TEST(CompileTier, TunePrebuildListsTheCacheKeysItBuilt) {
  gk::testenv::TempDir cache_dir;
  const auto prebuilt = gk::testing::run_cli(
      "tune --suite --prebuild --cc 90 --element f16 --suite-groups today --max-candidates 1 --json", cache_dir.str());
  ASSERT_EQ(prebuilt.status, 0) << prebuilt.out;
  const std::size_t json_start = prebuilt.out.find("{\n");  // after the progress lines (stderr, in the same text)
  ASSERT_NE(json_start, std::string::npos) << prebuilt.out;
  const auto listed = nlohmann::ordered_json::parse(prebuilt.out.substr(json_start));
  EXPECT_EQ(listed.at("kernels").get<int>(), 1);  // the four shapes of today's group share the default kernel
  const auto kernels = listed.at("list");
  ASSERT_EQ(kernels.size(), 1u) << prebuilt.out;

  const auto compiled = nlohmann::ordered_json::parse(
      run_cli(cache_dir.str(), "compile --cc 90 --element f16 --element-accumulator f32 --layout row --json"));
  EXPECT_EQ(compiled.at("cache"), "hit");
  EXPECT_EQ(kernels[0].at("cache_key"), compiled.at("cache_key"));
  EXPECT_EQ(kernels[0].at("kernel_name"), compiled.at("kernel_name"));
}
