// tests/gpu/split_gpu_test.cpp: SM90 kernels built on the split path (GEMMKIT_SPLIT_BUILD=1: a cubin and a host module
// that launches it through the driver API) give the reference's results: the default kernel (a 2x1x1 cluster launch)
// and a Stream-K kernel (a workspace reset before every launch) with a fused bias and activation, batched, with beta,
// run twice in one process (the cached Params), and with the Stream-K scheduler's run-time arguments (split-K slices,
// decomposition, reduction mode) that the host module must pass to the kernel's Params. FP8 scale vectors on the split
// path: fp8_gpu_test.cpp (Fp8ScaleVectorsSplitBuild).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "support/cli.hpp"
#include "support/gpu_test.hpp"
#include "unit/test_env.hpp"

namespace {

using Json = nlohmann::ordered_json;

Json cli_json(const std::string& arguments) {
  const gemmkit::testing::CliResult result = gemmkit::testing::run_cli(arguments);
  EXPECT_EQ(result.status, 0) << "gemmkit " << arguments << "\n" << result.out;
  return Json::parse(result.out);
}

}  // namespace

TEST(GpuSplit, SplitKernelsMatchTheReference) {
  REQUIRE_GPU();
  if (device_cc() != 90) GTEST_SKIP() << "the split build is for SM90 kernels; this GPU is SM" << device_cc();
  gemmkit::testenv::ScopedEnv split("GEMMKIT_SPLIT_BUILD", "1");
  struct Case {
    std::string plan;
    std::vector<std::string> runs;  // problems and run-time options
  };
  const std::string stream_k =
      "--cc 90 --element bf16 --element-accumulator f32 --layout row --swizzle ThreadblockSwizzleStreamK "
      "--activation relu --bias row";
  const Case cases[] = {
      {"--cc 90 --element f16 --element-accumulator f32 --layout row",
       {"--m 520 --n 264 --k 1000 --batch 2 --beta 0.5 --repeat 3", "--m 4096 --n 4096 --k 512 --repeat 2"}},
      {stream_k,
       {"--m 520 --n 264 --k 1000 --batch 2 --beta 0.5 --repeat 3", "--m 4096 --n 4096 --k 512 --repeat 2",
        "--m 256 --n 256 --k 8192 --split-k-slices 3 --repeat 2",
        "--m 256 --n 256 --k 8192 --beta 1 --split-k-slices 4 --reduction-mode Nondeterministic",
        "--m 384 --n 256 --k 6000 --decomposition StreamK --repeat 2"}},
  };
  for (const Case& c : cases) {
    const Json compiled = cli_json("compile " + c.plan + " --json");
    ASSERT_TRUE(compiled.contains("cubin_path")) << compiled.dump(2);  // built split, not in one pass
    EXPECT_TRUE(std::filesystem::exists(compiled.at("cubin_path").get<std::string>()));
    for (const std::string& problem : c.runs) {
      const Json run = cli_json("run " + c.plan + " " + problem + " --check --json");
      EXPECT_EQ(run.at("check").get<std::string>(), "pass") << c.plan << " " << problem << "\n" << run.dump(2);
    }
  }
}
