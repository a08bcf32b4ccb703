// tests/gpu/split_gpu_test.cpp: SM90 kernels built on the split path (GEMMKIT_SPLIT_BUILD=1: a cubin and a host module
// that launches it through the driver API) give the reference's results: the default kernel (a 2x1x1 cluster launch)
// and a Stream-K kernel (a workspace reset before every launch) with a fused bias and activation, batched, with beta,
// run twice in one process (the cached Params).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

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
  const std::string plans[] = {
      "--cc 90 --element f16 --element-accumulator f32 --layout row",
      "--cc 90 --element bf16 --element-accumulator f32 --layout row --swizzle ThreadblockSwizzleStreamK "
      "--activation relu --bias row",
  };
  for (const std::string& plan : plans) {
    const Json compiled = cli_json("compile " + plan + " --json");
    ASSERT_TRUE(compiled.contains("cubin_path")) << compiled.dump(2);  // built split, not in one pass
    EXPECT_TRUE(std::filesystem::exists(compiled.at("cubin_path").get<std::string>()));
    for (const char* shape :
         {"--m 520 --n 264 --k 1000 --batch 2 --beta 0.5 --repeat 3", "--m 4096 --n 4096 --k 512 --repeat 2"}) {
      const Json run = cli_json("run " + plan + " " + shape + " --check --json");
      EXPECT_EQ(run.at("check").get<std::string>(), "pass") << plan << " " << shape << "\n" << run.dump(2);
    }
  }
}
