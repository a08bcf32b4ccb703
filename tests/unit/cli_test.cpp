// tests/unit/cli_test.cpp: the gemmkit command line, driven as a user would (no nvcc or GPU needed).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gemmkit/device.hpp"
#include "support/cli.hpp"
#include "util/knobs.hpp"

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

// Usage errors (a bad value, an unknown command or option) exit 2; what only the plan can refuse exits 1.
TEST(Cli, BadInputIsATypedErrorInJsonAndTheExitCodeSaysWhichKind) {
  auto r = cli("plan --cc 90 --element f17 --json");
  EXPECT_EQ(r.status, 2);
  auto json = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(json.at("error").get<std::string>(), "UsageError");
  EXPECT_NE(json.at("message").get<std::string>().find("--element: unknown element type 'f17'"), std::string::npos);
  r = cli("plan --cc 75");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("gemmkit: ConfigError: gemmkit builds kernels for compute capability 80"), std::string::npos);
  r = cli("plan --cc 90 --tile 999 --json");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(nlohmann::ordered_json::parse(r.out).at("error").get<std::string>(), "ConfigError");
  r = cli("frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("Unknown command 'frobnicate'"), std::string::npos);
}

TEST(Cli, AnUnknownOptionIsAnErrorNamingTheNearestValidOne) {
  auto r = cli("plan --cc 90 --tiel 3");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("Unknown option --tiel"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("did you mean --tile?"), std::string::npos) << r.out;
  r = cli("plan --cc 90 extra");
  EXPECT_EQ(r.status, 2) << r.out;
}

TEST(Cli, VersionAndHelpForEveryCommand) {
  auto r = cli("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "gemmkit " GEMMKIT_VERSION "\n");
  // Each command's help: its usage line and an option only it takes; `gemmkit help <command>` says the same.
  for (const auto& [command, option] : std::vector<std::pair<std::string, std::string>>{{"plan", "--print-source"},
                                                                                        {"tiles", "--tile"},
                                                                                        {"compile", "--kernel-cc"},
                                                                                        {"run", "--repeat"},
                                                                                        {"cache", "ls"},
                                                                                        {"cache ls", "--json"},
                                                                                        {"demo", "--json"}}) {
    r = cli(command + " --help");
    EXPECT_EQ(r.status, 0) << command << ": " << r.out;
    EXPECT_NE(r.out.find("Usage: gemmkit " + command + " [OPTIONS]"), std::string::npos) << command << ": " << r.out;
    EXPECT_NE(r.out.find(option), std::string::npos) << command << ": " << r.out;
    if (command.find(' ') == std::string::npos) {
      EXPECT_EQ(cli("help " + command).out, r.out) << command;
    }
  }
  EXPECT_EQ(cli("run --help").out.find("--print-source"), std::string::npos);
  r = cli("help frob");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("no command 'frob'"), std::string::npos) << r.out;
}

// One line per configuration under a header: index, CTA tile, cluster, stages, schedules, the kernel name's
// ending; --json keeps every field.
TEST(Cli, TilesPrintsOneLinePerEntry) {
  const auto json = nlohmann::ordered_json::parse(cli("tiles --cc 90 --json").out);
  const auto& tiles = json.at("tile_descriptions");
  const auto r = cli("tiles --cc 90");
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<std::string> lines;
  std::istringstream text(r.out);
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), tiles.size() + 1) << r.out;
  EXPECT_EQ(lines[0].rfind("#  ", 0), 0u) << lines[0];
  auto shape = [](const nlohmann::ordered_json& s) {
    return std::to_string(s[0].get<int>()) + "x" + std::to_string(s[1].get<int>()) + "x" +
           std::to_string(s[2].get<int>());
  };
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    std::istringstream words(lines[i + 1]);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    ASSERT_EQ(w.size(), 8u) << lines[i + 1];
    const auto& t = tiles[i];
    EXPECT_EQ(w[0], std::to_string(i));
    EXPECT_EQ(w[1], shape(t.at("cta_tile")));
    EXPECT_EQ(w[2], shape(t.at("cluster_shape")));
    EXPECT_EQ(w[3], t.at("stages").get<int>() == 0 ? "auto" : std::to_string(t.at("stages").get<int>()));
    EXPECT_EQ(w[4], t.at("kernel_schedule").get<std::string>());
    EXPECT_EQ(w[5], t.at("epilogue_schedule").get<std::string>());
    EXPECT_EQ(w[6], t.at("tile_scheduler").get<std::string>());
    const std::string name = t.at("kernel_name").get<std::string>();
    EXPECT_EQ(name.substr(name.size() - w[7].size()), w[7]);
    EXPECT_LT(w[7].size(), name.size());
  }
}

// No kernel for the combination: the library's nearest combination, as this command line would ask for it.
TEST(Cli, NoKernelSuggestsTheNearestCombinationAsOptions) {
  auto r = cli("tiles --cc 80 --element bf16 --layout col");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("The nearest combination with a kernel sets --element-accumulator f32."), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("element_accumulator"), std::string::npos) << r.out;
  r = cli("tiles --cc 80 --element bf16 --layout col --json");
  EXPECT_EQ(nlohmann::ordered_json::parse(r.out).at("nearest"),
            nlohmann::ordered_json({{"--element-accumulator", "f32"}}));
  EXPECT_EQ(cli("tiles --cc 80 --element bf16 --layout col --element-accumulator f32").status, 0);
}

// The CLI resolves every type and layout through the library: its plan --json equals the C++ plan given the same
// options (the CLI's --element f16 and --layout row where a line names neither, as its help says).
TEST(Cli, PlanResolvesTypesAsTheLibraryDoes) {
  struct Case {
    std::string line;
    gemmkit::GemmOptions options;
  };
  using gemmkit::DataType;
  using gemmkit::Layout;
  auto options = [](DataType element, Layout layout) {
    gemmkit::GemmOptions o;
    o.element = element;
    o.layout = layout;
    o.cc = 90;
    return o;
  };
  std::vector<Case> cases = {
      {"", options(DataType::f16, Layout::RowMajor)},
      {"--element bf16 --element-accumulator f32", options(DataType::bf16, Layout::RowMajor)},
      {"--element f32 --layout col", options(DataType::f32, Layout::ColumnMajor)},
      {"--element-c f32 --element-d f32 --layout-b col", options(DataType::f16, Layout::RowMajor)},
      {"--element s8 --element-accumulator s32 --element-c s32 --element-d s32 --layout-b col",
       options(DataType::s8, Layout::RowMajor)}};
  cases[1].options.element_accumulator = DataType::f32;
  cases[3].options.element_c = cases[3].options.element_d = DataType::f32;
  cases[3].options.layout_b = Layout::ColumnMajor;
  cases[4].options.element_accumulator = cases[4].options.element_c = cases[4].options.element_d = DataType::s32;
  cases[4].options.layout_b = Layout::ColumnMajor;
  for (const Case& c : cases) {
    const auto r = cli("plan --cc 90 --json " + c.line);
    ASSERT_EQ(r.status, 0) << c.line << ": " << r.out;
    const auto json = nlohmann::ordered_json::parse(r.out);
    const gemmkit::Gemm plan(c.options);
    auto name = [](auto value) { return std::string(gemmkit::to_string(value)); };
    EXPECT_EQ(json.at("element_a"), name(plan.element_a())) << c.line;
    EXPECT_EQ(json.at("element_b"), name(plan.element_b())) << c.line;
    EXPECT_EQ(json.at("element_c"), name(plan.element_c())) << c.line;
    EXPECT_EQ(json.at("element_d"), name(plan.element_d())) << c.line;
    EXPECT_EQ(json.at("element_accumulator"), name(plan.element_accumulator())) << c.line;
    EXPECT_EQ(json.at("layout_a"), name(plan.layout_a())) << c.line;
    EXPECT_EQ(json.at("layout_b"), name(plan.layout_b())) << c.line;
    EXPECT_EQ(json.at("layout_c"), name(plan.layout_c())) << c.line;
    EXPECT_EQ(json.at("kernel_name"), plan.kernel_name()) << c.line;
  }
  // Without --element-accumulator the accumulator is C's type, as in C++ and Python (no f32 forced for f16).
  EXPECT_EQ(nlohmann::ordered_json::parse(cli("plan --cc 90 --json").out).at("element_accumulator"), "f16");
}

TEST(Cli, PlansTakeBiasKernelCcAndRasterOrder) {
  auto r = cli("plan --cc 90 --kernel-cc 80 --element-accumulator f32 --bias column --activation relu --json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto json = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(json.at("kernel_cc").get<int>(), 80);
  EXPECT_EQ(json.at("kernel_name").get<std::string>(),
            "cutlass_tensorop_f16_s16816gemm_f16_256x128_64x3_tt_align8_relu_biascolumn");
  r = cli("plan --cc 90 --raster-order AlongN --max-swizzle-size 2");
  EXPECT_EQ(r.status, 0) << r.out;
  r = cli("plan --cc 80 --raster-order AlongN");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--raster-order AlongN: Raster order applies to SM90"), std::string::npos) << r.out;
}

// --activation-at-launch 1 names the kernel that serves every activation; a grouped plan has no such kernel.
TEST(Cli, ActivationAtLaunchNamesTheSharedKernel) {
  auto r = cli("plan --cc 90 --element-accumulator f32 --activation gelu --activation-at-launch 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto json = nlohmann::ordered_json::parse(r.out);
  EXPECT_TRUE(json.at("activation_at_launch").get<bool>());
  const std::string name = json.at("kernel_name").get<std::string>();
  EXPECT_TRUE(name.ends_with("_act_at_launch")) << name;
  r = cli("plan --cc 90 --element-accumulator f32 --activation silu --activation-at-launch 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::ordered_json::parse(r.out).at("kernel_name").get<std::string>(), name);
  r = cli("plan --cc 90 --grouped --activation relu --activation-at-launch 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--activation-at-launch applies to a GEMM plan"), std::string::npos) << r.out;
}

TEST(Cli, BlockScaledFp8PlansShowTheirKernelAndRunSaysWhereToRunThem) {
  const std::string fp8 = "--cc 90 --element e4m3 --element-c bf16 --element-d bf16 --layout-b col";
  auto r = cli("plan " + fp8 + " --block-scaling blockwise --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string name = nlohmann::ordered_json::parse(r.out).at("kernel_name").get<std::string>();
  EXPECT_TRUE(name.ends_with("_blockwise")) << name;
  r = cli("plan --cc 90 --block-scaling blockwise");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--block-scaling blockwise: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Block scaling scales FP8 operands"), std::string::npos) << r.out;
  r = cli("run " + fp8 + " --block-scaling blockwise");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("gemmkit run has no block scales"), std::string::npos) << r.out;
}

// --m --n --k: plan and compile take the kernel run() picks for that GEMM (parallel split-K here); tune takes them
// as its problem (its --n and --k were once refused as a conv's).
TEST(Cli, PlanAndCompileTakeTheKernelRunPicksForAProblem) {
  auto r = cli("plan --cc 90 --element-accumulator f32 --m 512 --n 512 --k 16384 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::ordered_json::parse(r.out).at("kernel_name").get<std::string>(),
            "cutlass3x_sm90_tensorop_s0x0x0gemm_f16_f16_f32_f16_f16_128x64x64_1x1x1_0_ttt_align8_splitk_parallel");
  EXPECT_EQ(nlohmann::ordered_json::parse(r.out).at("run"),
            (nlohmann::ordered_json{{"decomposition", "SplitK"}, {"splits", 4}, {"max_swizzle_size", 1}}));
  r = cli("plan --cc 90 --element-accumulator f32 --m 16384 --n 16384 --k 16384");
  EXPECT_NE(r.out.find("run(): DataParallel, scheduler swizzle 8\n"), std::string::npos) << r.out;
  r = cli("plan --cc 90 --element e4m3 --element-c bf16 --element-d bf16 --layout-b col --m 8192 --n 8192 --k 8192");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(
      r.out.find(
          "_e4m3_e4m3_f32_bf16_bf16_256x192x128_2x1x1_0_tnt_align16_warpspecialized_cooperative_fp8overlap_epi_tma\n"),
      std::string::npos)
      << r.out;
  for (const auto& [arguments, message] : std::vector<std::pair<std::string, std::string>>{
           {"plan --cc 90 --m 512 --n 512", "--m, --n and --k go together"},
           {"compile --cc 90 --k 512", "--m, --n and --k go together"},
           {"tiles --cc 90 --m 5 --n 5 --k 5", "tiles lists them all"},
           {"plan --cc 90 --grouped --m 5 --n 5 --k 5", "a grouped plan's problems are given at run time"},
           {"plan --cc 90 --conv fprop --m 5", "--m is a GEMM's"},
           {"plan --cc 90 --conv fprop --n 2", "--n is --batch for conv"}}) {
    r = cli(arguments);
    EXPECT_EQ(r.status, 2) << arguments << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << arguments << ": " << r.out;
  }
  r = cli("tune --cc 90 --m 128 --n 256 --k 64");
  EXPECT_EQ(r.out.find("UsageError"), std::string::npos) << r.out;
}

TEST(Cli, UsageWithoutCommand) {
  auto r = cli("");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("usage: gemmkit <command>"), std::string::npos);
}

// --grouped plans, lists and compiles GroupedGemm kernels with the same options; --groups belongs to grouped runs.
TEST(Cli, GroupedPlansNameTheGroupedFamilies) {
  const auto sm90 = gemmkit::testing::run_cli("plan --cc 90 --grouped --element-accumulator f32 --json");
  ASSERT_EQ(sm90.status, 0) << sm90.out;
  const auto json = nlohmann::ordered_json::parse(sm90.out.substr(sm90.out.find('{')));
  EXPECT_EQ(json.at("family").get<std::string>(), "sm90_grouped");
  EXPECT_EQ(json.at("kernel_name").get<std::string>(),
            "cutlass3x_sm90_tensorop_s0x0x0gemm_grouped_f16_f16_f32_f16_f16_128x128x64_1x1x1_0_ttt_align8");
  const auto sm80 = gemmkit::testing::run_cli("plan --cc 90 --grouped --kernel-cc 80 --element-accumulator f32");
  EXPECT_NE(sm80.out.find("cutlass_tensorop_f16_s16816gemm_grouped_f16_256x128_64x3_tt_align8"), std::string::npos);
  const auto swizzle = gemmkit::testing::run_cli("plan --cc 90 --grouped --swizzle ThreadblockSwizzleStreamK");
  EXPECT_EQ(swizzle.status, 1);
  EXPECT_NE(swizzle.out.find("Grouped GEMM does not currently support different swizzling functors"),
            std::string::npos);
  const auto groups = gemmkit::testing::run_cli("run --groups 4");
  EXPECT_EQ(groups.status, 2);
  EXPECT_NE(groups.out.find("--groups needs --grouped"), std::string::npos);
}

namespace {

// The first word of each row under `heading` ("Options:"), up to the next empty line: "  -h,--help  Print..." gives
// "-h,--help", "  --cc N  target..." "--cc". A row starts two spaces in; help continued below a long name starts
// further in and is no row.
std::vector<std::string> first_words(const std::string& help, const std::string& heading) {
  std::vector<std::string> out;
  std::istringstream in(help);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (!inside) {
      inside = line == heading;
      continue;
    }
    if (line.find_first_not_of(' ') == std::string::npos) break;
    if (line.size() > 2 && line.compare(0, 2, "  ") == 0 && line[2] != ' ') {
      out.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  return out;
}

// Each command's option names ({-h, --help, --json, --cc, ...}) from its --help, and its subcommands' from theirs. The
// walk is bounded (commands two words deep, 20 in all, names in lowercase): a help text it cannot read misses
// commands, which the tests report, instead of recursing.
void walk_options(const std::string& command, int depth, std::map<std::string, std::vector<std::string>>& out) {
  if (out.count(command) || out.size() >= 20) return;
  const CliResult help = cli(command + " --help");
  EXPECT_EQ(help.status, 0) << command << ": " << help.out;
  auto& names = out[command];
  for (const std::string& word : first_words(help.out, "Options:")) {
    for (std::size_t start = 0; start < word.size();) {
      const std::size_t comma = std::min(word.find(',', start), word.size());
      if (comma > start) names.push_back(word.substr(start, comma - start));
      start = comma + 1;
    }
  }
  if (depth == 2) return;
  for (const std::string& sub : first_words(help.out, "Subcommands:")) {
    const bool lowercase = std::all_of(
        sub.begin(), sub.end(), [](char ch) { return std::islower(static_cast<unsigned char>(ch)) || ch == '-'; });
    EXPECT_TRUE(lowercase) << command << " --help lists '" << sub << "' as a command";
    if (lowercase) walk_options(command.empty() ? sub : command + " " + sub, depth + 1, out);
  }
}

std::map<std::string, std::vector<std::string>> options_by_command() {
  std::map<std::string, std::vector<std::string>> out;
  walk_options("", 0, out);
  return out;
}

}  // namespace

// CLI11 2.4 and newer match a one-letter long name against the short names: `--h` beside `-h` aborted every start
// with OptionAlreadyAdded. No command may have a long name that is also a short name.
TEST(Cli, NoLongOptionNameIsAlsoAShortName) {
  const auto commands = options_by_command();
  std::set<std::string> walked;
  for (const auto& entry : commands) walked.insert(entry.first);
  EXPECT_EQ(walked,
            (std::set<std::string>{"", "plan", "tiles", "compile", "run", "tune", "prebuild", "cache", "cache clear",
                                   "cache export", "cache import", "cache info", "cache ls", "demo", "help"}));
  for (const auto& [command, names] : commands) {
    std::set<std::string> shorts, longs;
    for (const std::string& name : names) {
      ASSERT_EQ(name.rfind('-', 0), 0u) << command << ": " << name;
      (name.rfind("--", 0) == 0 ? longs : shorts).insert(name.substr(name.find_first_not_of('-')));
    }
    EXPECT_TRUE(longs.count("help")) << command;
    EXPECT_TRUE(shorts.count("h")) << command;
    for (const std::string& name : longs) {
      EXPECT_FALSE(shorts.count(name)) << command << ": --" << name << ", -" << name;
    }
  }
  // The conv problem is named, not lettered; the GEMM's --m --n --k are the only one-letter long names.
  for (const auto& [command, names] : commands) {
    for (const std::string& name : names) {
      if (name.size() == 3 && name.rfind("--", 0) == 0) {
        EXPECT_NE(std::string("mnk").find(name[2]), std::string::npos) << command << ": " << name;
      }
    }
  }
}

// The help layout is gemmkit's own (tools/gemmkit/help_format.cpp), not CLI11's, which 2.5 changed (headings,
// columns, wrapping, trailing spaces): the same text whichever CLI11 the CLI is built with.
TEST(Cli, HelpHasOneLayoutWithEveryCli11) {
  EXPECT_EQ(cli("cache export --help").out,
            "cache export: every entry into one tar archive\n"
            "Usage: gemmkit cache export [OPTIONS] [file]\n"
            "\n"
            "Positionals:\n"
            "  file FILE.tar               the archive: one plain tar file of cache entries, e.g. app.tar\n"
            "\n"
            "Options:\n"
            "  -h,--help                   Print this help message and exit\n"
            "  --json                      print one JSON object (errors too)\n"
            "  --pack NAME                 only this named pack's kernels\n"
            "  --pack-file FILE            only the kernels of this pack file\n"
            "\n");
  EXPECT_NE(cli("cache --help").out.find("Usage: gemmkit cache [OPTIONS] [SUBCOMMAND]\n"), std::string::npos);
  for (const auto& [command, names] : options_by_command()) {
    std::istringstream lines(cli(command + " --help").out);  // 2.5 wraps help, each line ending in a space
    for (std::string line; std::getline(lines, line);) {
      EXPECT_TRUE(line.empty() || line.back() != ' ') << command << ": '" << line << "'";
    }
  }
}

// A conv's problem is --batch --height --width --channels --out-channels --filter-height --filter-width; the GEMM-style
// letters are refused naming the option that replaced each.
TEST(Cli, ConvCommandsTakeConvNamesAndRefuseTheGemmLetters) {
  auto r =
      cli("plan --conv fprop --cc 80 --kernel-cc 80 --element f16 --element-accumulator f32 --batch 2 --height 14 "
          "--width 14 --channels 12 --out-channels 64 --filter-height 3 --filter-width 3 --stride 2 --pad 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(nlohmann::ordered_json::parse(r.out).at("kernel_name").get<std::string>().find("fprop_optimized"),
            std::string::npos)
      << r.out;
  // A filter larger than the padded input: the sizes reach the library (its ConfigError, exit 1).
  r = cli("plan --conv fprop --cc 80 --height 2 --width 2 --filter-height 5 --filter-width 5 --pad 0");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("larger than the padded input"), std::string::npos) << r.out;
  for (const auto& [letter, option] : std::vector<std::pair<std::string, std::string>>{{"n", "batch"},
                                                                                       {"h", "height"},
                                                                                       {"w", "width"},
                                                                                       {"c", "channels"},
                                                                                       {"k", "out-channels"},
                                                                                       {"r", "filter-height"},
                                                                                       {"s", "filter-width"}}) {
    for (const char* command : {"plan", "compile", "run"}) {
      const std::string line = std::string(command) + " --conv fprop --cc 90 --" + letter + " 3";
      r = cli(line);
      EXPECT_EQ(r.status, 2) << line << ": " << r.out;
      EXPECT_NE(r.out.find("UsageError"), std::string::npos) << line << ": " << r.out;
      EXPECT_NE(r.out.find("--" + letter + " is --" + option + " for conv"), std::string::npos)
          << line << ": " << r.out;
    }
    if (option == "batch") continue;  // without --conv, a GEMM's batch count
    r = cli("plan --cc 90 --" + option + " 3");
    EXPECT_EQ(r.status, 2) << option << ": " << r.out;
    EXPECT_NE(r.out.find("--" + option + " needs --conv KIND"), std::string::npos) << r.out;
  }
}

// The library's messages are shared with C++ and Python (kernel_cc=80, cc=90); the CLI prints them as options.
TEST(Cli, LibraryMessagesAreSpelledAsOptions) {
  for (const auto& [line, spelled, library] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"plan --cc 80 --element e4m3", "with --cc 90 (and no --kernel-cc, or --kernel-cc 90)", "cc="},
           {"plan --cc 90 --element e4m3 --element-accumulator f16",
            "got --element-accumulator f16. Set --element-accumulator f32 (or leave it unset).", "element_accumulator"},
           {"plan --cc 100", "Pass --cc 90 to build Hopper kernels.", "cc="},
           {"plan --cc 80 --max-swizzle-size 2", "--max-swizzle-size applies to SM90 persistent tile schedulers",
            "max_swizzle_size"},
           {"plan --cc 80 --max-swizzle-size 2", "Use --swizzle IdentitySwizzle2 instead.", "swizzle ="}}) {
    auto r = cli(line);
    EXPECT_EQ(r.status, 1) << line << ": " << r.out;
    EXPECT_NE(r.out.find(spelled), std::string::npos) << line << ": " << r.out;
    EXPECT_EQ(r.out.find(library), std::string::npos) << line << ": " << r.out;
    r = cli(line + " --json");
    EXPECT_NE(nlohmann::ordered_json::parse(r.out).at("message").get<std::string>().find(spelled), std::string::npos)
        << line << ": " << r.out;
  }
}

// Without a GPU (this machine) the commands that launch kernels exit 1 saying so and what works without one, before
// any allocation; no message names a source file of gemmkit's.
TEST(Cli, GpuCommandsWithoutAGpuSayWhatWorksWithoutOne) {
  if (gemmkit::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA GPU is present: these commands run";
  for (const char* line : {"run --cc 90", "run", "run --cc 80 --check", "run --grouped --cc 90",
                           "run --conv fprop --cc 90 --batch 2", "run --conv wgrad --cc 80"}) {
    const auto r = cli(line);
    EXPECT_EQ(r.status, 1) << line << ": " << r.out;
    EXPECT_EQ(r.out.rfind("gemmkit: CudaError: gemmkit run needs a CUDA GPU; none found (cudaGetDeviceCount: ", 0), 0u)
        << line << ": " << r.out;
    EXPECT_NE(r.out.find("`gemmkit compile` and `gemmkit plan` work without one."), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(".cpp"), std::string::npos) << line << ": " << r.out;
    EXPECT_EQ(r.out.find("cudaMalloc"), std::string::npos) << line << ": " << r.out;
  }
  for (const char* line : {"tune --cc 90", "tune --cc 90 --m 256 --n 256 --k 256", "tune --cc 90 --suite"}) {
    const auto r = cli(std::string(line) + " --json");
    EXPECT_EQ(r.status, 1) << line << ": " << r.out;
    const auto json = nlohmann::ordered_json::parse(r.out);
    EXPECT_EQ(json.at("error"), "CudaError") << r.out;
    const std::string message = json.at("message");
    EXPECT_EQ(message.rfind("gemmkit tune measures kernels, so it needs a CUDA GPU; none found", 0), 0u) << message;
    EXPECT_EQ(message.find("cc=90"), std::string::npos) << message;
  }
  // What only the plan can refuse is still said first when --cc is given.
  const auto r = cli("run --cc 75");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("ConfigError: gemmkit builds kernels for compute capability 80"), std::string::npos) << r.out;
}

// `gemmkit help` is `gemmkit --help`; the environment table is printed once, by `gemmkit help env`.
TEST(Cli, HelpIsTheCommandListAndHelpEnvTheEnvironment) {
  const auto top = cli("--help");
  ASSERT_EQ(top.status, 0) << top.out;
  const auto help = cli("help");
  EXPECT_EQ(help.status, 0) << help.out;
  EXPECT_EQ(help.out, top.out);
  EXPECT_NE(top.out.find("Subcommands:\n  plan "), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("gemmkit help env lists the environment variables."), std::string::npos) << top.out;
  const auto env = cli("help env");
  EXPECT_EQ(env.status, 0) << env.out;
  for (const auto& knob : gemmkit::knobs::all()) {
    EXPECT_NE(env.out.find("  " + std::string(knob.name) + " "), std::string::npos) << knob.name;
  }
  for (const auto& [command, names] : options_by_command()) {
    const std::string text = cli(command + " --help").out;
    EXPECT_EQ(text.find("GEMMKIT_CACHE_DIR"), std::string::npos) << command << ": " << text;
    EXPECT_EQ(text.find("CUTLASS_PATH"), std::string::npos) << command << ": " << text;
  }
}

// cache export and import name the archive they need and show a whole command line.
TEST(Cli, CacheExportAndImportWithoutAFileSayWhatTheFileIs) {
  auto r = cli("cache export");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("gemmkit cache export needs the archive to write, a tar file: gemmkit cache export FILE.tar "
                       "[--pack NAME | --pack-file FILE]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("e.g. gemmkit cache export app.tar --pack-file app.pack."), std::string::npos) << r.out;
  r = cli("cache export --pack defaults --json");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(nlohmann::ordered_json::parse(r.out).at("message").get<std::string>().find("FILE.tar"), std::string::npos);
  r = cli("cache import");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("gemmkit cache import FILE.tar, e.g. gemmkit cache import app.tar."), std::string::npos)
      << r.out;
  EXPECT_NE(cli("cache export --help").out.find("FILE.tar"), std::string::npos);
}

// --math-operation: 3xTF32 on an SM90 GPU moves the plan to the 2.x kernels and says so; pinned to kernel_cc 90 the
// library's refusal names the option that fixes it.
TEST(Cli, MathOperationMovesSm90PlansTo2xKernelsUnlessPinned) {
  auto result = gemmkit::testing::run_cli("plan --cc 90 --element f32 --math-operation multiply_add_fast_f32");
  EXPECT_EQ(result.status, 0) << result.out;
  EXPECT_NE(result.out.find("kernel: cutlass_tensorop_s1688gemm_"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("sm80_universal"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("note: math operation multiply_add_fast_f32"), std::string::npos) << result.out;
  result =
      gemmkit::testing::run_cli("plan --cc 90 --kernel-cc 90 --element f32 --math-operation multiply_add_fast_f32");
  EXPECT_EQ(result.status, 1) << result.out;
  EXPECT_NE(result.out.find("--kernel-cc 80"), std::string::npos) << result.out;
  result = gemmkit::testing::run_cli("plan --cc 80 --element f32 --math-operation fast");
  EXPECT_EQ(result.status, 2) << result.out;
  EXPECT_NE(result.out.find("multiply_add_fast_bf16"), std::string::npos) << result.out;
}
