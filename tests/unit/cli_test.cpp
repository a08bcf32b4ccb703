// tests/unit/cli_test.cpp: the gemmkit command line, driven as a user would (no nvcc or GPU needed).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "support/cli.hpp"

using gemmkit::testing::CliResult;

CliResult cli(const std::string& arguments) {
  return gemmkit::testing::run_cli(arguments);
}

TEST(Cli, PlanPrintsTheReferenceKernelNamesAsJson) {
  auto r = cli("plan --cc 90 --element f16 --element-accumulator f32 --layout row --json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto json = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(json.at("kernel_name").get<std::string>(),
            "cutlass3x_sm90_tensorop_s0x0x0gemm_f16_f16_f32_f16_f16_256x256x64_2x1x1_0_ttt_align8");
  r = cli("plan --cc 80 --element f16 --element-accumulator f32 --layout row --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::ordered_json::parse(r.out).at("kernel_name").get<std::string>(),
            "cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tt_align8");
}

TEST(Cli, PrintSourceShowsTheGeneratedTranslationUnit) {
  auto r = cli("plan --cc 90 --print-source");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("CollectiveBuilder"), std::string::npos);
  EXPECT_NE(r.out.find("gemmkit/module_entry.hpp"), std::string::npos);
}

TEST(Cli, TilesListsEveryConfiguration) {
  auto r = cli("tiles --cc 80 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto json = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(json.at("count").get<std::uint64_t>(), 22u);
  EXPECT_EQ(json.at("tile_descriptions").size(), 22u);
}

TEST(Cli, BadInputIsATypedErrorInJson) {
  auto r = cli("plan --cc 90 --element f17 --json");
  EXPECT_EQ(r.status, 1);
  auto json = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(json.at("error").get<std::string>(), "ConfigError");
  EXPECT_NE(json.at("message").get<std::string>().find("unknown element type 'f17'"), std::string::npos);
  r = cli("plan --cc 75");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("gemmkit: ConfigError: gemmkit builds kernels for compute capability 80"), std::string::npos);
  r = cli("frobnicate");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("Unknown command 'frobnicate'"), std::string::npos);
}

TEST(Cli, AnUnknownOptionIsAnErrorNamingTheNearestValidOne) {
  auto r = cli("plan --cc 90 --tiel 3");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("Unknown option --tiel"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("did you mean --tile?"), std::string::npos) << r.out;
  r = cli("plan --cc 90 extra");
  EXPECT_EQ(r.status, 1) << r.out;
}

TEST(Cli, PlansTakeBiasKernelCcAndRasterOrder) {
  auto r = cli("plan --cc 90 --kernel-cc 80 --bias column --activation relu --json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto json = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(json.at("kernel_cc").get<int>(), 80);
  EXPECT_EQ(json.at("kernel_name").get<std::string>(),
            "cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tt_align8_relu_biascolumn");
  r = cli("plan --cc 90 --raster-order AlongN --max-swizzle-size 2");
  EXPECT_EQ(r.status, 0) << r.out;
  r = cli("plan --cc 80 --raster-order AlongN");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("Raster order applies to SM90"), std::string::npos) << r.out;
}

TEST(Cli, UsageWithoutCommand) {
  auto r = cli("");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("usage: gemmkit <command>"), std::string::npos);
}
