// tools/gemmkit/options.cpp: the checks of option values and the option tables the commands share.
#include "options.hpp"

#include <charconv>
#include <cmath>

#include "gemmkit/conv2d.hpp"
#include "gemmkit/gemm.hpp"

namespace gemmkit::cli {

// A whole word in decimal, or nullopt.
std::optional<std::int64_t> parse_integer(const std::string& text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A whole word that is a finite number, or nullopt.
std::optional<double> parse_real(const std::string& text) {
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

// CLI11 takes the word after an option as its value even when that word is the next option.
std::string got(const std::string& text) {
  if (text.rfind("--", 0) == 0) return "got the option " + text + " instead of a value";
  return "got '" + text + "'";
}

// A check CLI11 runs on an option's value as it parses it: "" for a good value, else why not (after "--option: ").
CLI::Validator value_check(std::function<std::string(const std::string&)> why_not) {
  return CLI::Validator([why_not](std::string& text) { return why_not(text); }, "");
}

CLI::Validator integer_check(std::int64_t min, std::int64_t max) {
  return value_check([=](const std::string& text) -> std::string {
    const auto value = parse_integer(text);
    if (value && *value >= min && *value <= max) return "";
    return "expects an integer from " + std::to_string(min) + " to " + std::to_string(max) + "; " + got(text) + ".";
  });
}

CLI::Validator integer_one_of(const std::vector<std::int64_t>& allowed) {
  std::string list;
  for (const std::int64_t a : allowed) list += (list.empty() ? "" : ", ") + std::to_string(a);
  return value_check([=](const std::string& text) -> std::string {
    const auto value = parse_integer(text);
    if (value && std::find(allowed.begin(), allowed.end(), *value) != allowed.end()) return "";
    return "expects one of " + list + "; " + got(text) + ".";
  });
}

CLI::Validator real_check() {
  return value_check([](const std::string& text) -> std::string {
    return parse_real(text) ? "" : "expects a finite number; " + got(text) + ".";
  });
}

// Every command that builds a plan takes these. Each value reaches the library as given, and what is not given is
// left to the library's defaults (GemmOptions, the Gemm setters), except --element and --layout: the library takes
// no default for an operand's type and layout, the command line fills in f16 and row.
std::vector<OptionRow> plan_table() {
  return {
      {"cc", "N", "target compute capability, e.g. 80 or 90 (default: the current GPU's)", integer_check(1, kInt32Max)},
      {"kernel-cc", "N",
       "kernel generation: 80 (CUTLASS 2.x kernels, any SM80+ GPU) or 90 (CUTLASS 3.x, SM90 only); default: the "
       "best for --cc",
       integer_check(1, kInt32Max)},
      {"element", "TYPE", "element type of every operand not given its own, " + one_of<DataType>(),
       enum_check<DataType>(), "f16"},
      {"element-a", "TYPE", "element type of A", enum_check<DataType>()},
      {"element-b", "TYPE", "element type of B", enum_check<DataType>()},
      {"element-c", "TYPE", "element type of C", enum_check<DataType>()},
      {"element-d", "TYPE", "element type of D", enum_check<DataType>()},
      {"element-accumulator", "TYPE", "accumulator type (default: C's element type)", enum_check<DataType>()},
      {"layout", "LAYOUT", "layout of every operand not given its own, " + one_of<Layout>() + " (or row, col)",
       enum_check<Layout>(), "row"},
      {"layout-a", "LAYOUT", "layout of A", enum_check<Layout>()},
      {"layout-b", "LAYOUT", "layout of B", enum_check<Layout>()},
      {"layout-c", "LAYOUT", "layout of C and D", enum_check<Layout>()},
      {"opclass", "CLASS", one_of<OpClass>(), enum_check<OpClass>()},
      {"math-operation", "MATH",
       "the kernels' math, " + one_of<MathOperation>() + " (default: the family's; fast_f32 = 3xTF32)",
       enum_check<MathOperation>()},
      {"swizzle", "NAME", one_of<Swizzle>(), enum_check<Swizzle>()},
      {"activation", "NAME", one_of<Activation>(), enum_check<Activation>()},
      {"activation-parameter", "X", "the leaky_relu slope (needs --activation; default 0.01)", real_check()},
      {"bias", "MODE", "a bias vector added before the activation, " + one_of<BiasMode>(), enum_check<BiasMode>()},
      {"activation-at-launch", "0|1",
       "SM90 GEMM plans: 1 builds one kernel that takes the activation at launch and serves every activation, 0 "
       "compiles it in (default: GEMMKIT_ACTIVATION_AT_LAUNCH, on; FP8 operands: off)",
       integer_one_of({0, 1})},
      {"block-scaling", "MODE",
       "SM90 FP8 plans (GEMM or --grouped): block scales in the mainloop (blockwise: A per row and 128-wide K "
       "block, B per 128x128 block), " +
           one_of<BlockScaling>(),
       enum_check<BlockScaling>()},
      {"raster-order", "ORDER", "SM90 persistent schedulers, " + one_of<RasterOrder>(), enum_check<RasterOrder>()},
      // The library's rule (Gemm::set_max_swizzle_size), checked here too so that it fails before any GPU query.
      {"max-swizzle-size", "N", "SM90 persistent schedulers: 1, 2, 4 or 8 (default: chosen per problem)",
       integer_one_of({1, 2, 4, 8})},
      {"decomposition", "MODE",
       "SM90 Stream-K kernels, " + one_of<Decomposition>() + " (SplitK: --split-k-slices; default Auto)",
       enum_check<Decomposition>()},
      {"reduction-mode", "MODE", "SM90 split-K / Stream-K partial sums, " + one_of<ReductionMode>(),
       enum_check<ReductionMode>()},
      {"tile", "N", "use the N-th entry of `gemmkit tiles` instead of the default", integer_check(0, kInt32Max)},
  };
}

// The problem of gemmkit run and tune: each operand (batch included) holds at most 2^31-1 elements (checked after
// parsing).
std::vector<OptionRow> problem_table() {
  return {
      {"m", "M", "rows of A and D", integer_check(1, kInt32Max), "128"},
      {"n", "N", "columns of B and D", integer_check(1, kInt32Max), "128"},
      {"k", "K", "columns of A, rows of B", integer_check(1, kInt32Max), "128"},
      {"batch", "B", "batch count; with --conv: images (N)", integer_check(1, kInt32Max), "1"},
  };
}

// With --conv KIND the plan is a Conv2d: these give its problem (with --batch, the images). Given sizes make plan and
// compile show and build the kernel run would choose for them. Named for what they are, not by the GEMM-style
// letters (N H W C K R S): --n and --k are a GEMM's, and a one-letter long name can collide with a short one (-h).
const std::vector<std::string>& conv_size_names() {
  static const std::vector<std::string> names = {"height",       "width",  "channels", "out-channels", "filter-height",
                                                 "filter-width", "stride", "pad",      "dilation"};
  return names;
}

std::vector<OptionRow> conv_table() {
  std::vector<OptionRow> rows = {
      {"conv", "KIND", "a Conv2d instead of a GEMM, " + one_of<ConvKind>(), enum_check<ConvKind>()},
      {"height", "H", "with --conv: input height", integer_check(1, kInt32Max), "56"},
      {"width", "W", "with --conv: input width", integer_check(1, kInt32Max), "56"},
      {"channels", "C", "with --conv: input channels", integer_check(1, kInt32Max), "64"},
      {"out-channels", "K", "with --conv: output channels (the filter count)", integer_check(1, kInt32Max), "64"},
      {"filter-height", "R", "with --conv: filter height", integer_check(1, kInt32Max), "3"},
      {"filter-width", "S", "with --conv: filter width", integer_check(1, kInt32Max), "3"},
      {"stride", "N", "with --conv: stride (both axes)", integer_check(1, kInt32Max), "1"},
      {"pad", "N", "with --conv: zero padding on each side (both axes)", integer_check(0, kInt32Max), "1"},
      {"dilation", "N", "with --conv: dilation (both axes)", integer_check(1, kInt32Max), "1"},
      {"iterator-algorithm", "NAME", "with --conv: " + one_of<IteratorAlgorithm>() + " (default: by problem)",
       enum_check<IteratorAlgorithm>()},
      {"split-k-slices", "N",
       "with --conv: split-K slices (serial unless --split-k-mode says; default: by problem); else SM90 split-K slices "
       "of a Stream-K kernel (1: run() chooses)",
       integer_check(1, 65535)},
      {"split-k-mode", "NAME",
       "with --conv: " + one_of<SplitKMode>() + " split-K (default: parallel for wgrad under a wave of CTAs)",
       enum_check<SplitKMode>()},
  };
  return rows;
}

// The problem plan and compile show and build run()'s kernel for: a GEMM's --m --n --k (--batch), or with --conv
// the images --batch beside conv_table's sizes.
std::vector<OptionRow> sized_plan_table() {
  return {
      {"m", "M", "with --n --k: the GEMM's rows of A and D (plan and compile then take the kernel run() picks for it)",
       integer_check(1, kInt32Max)},
      {"n", "N", "with --m --k: the GEMM's columns of B and D", integer_check(1, kInt32Max)},
      {"k", "K", "with --m --n: the GEMM's depth", integer_check(1, kInt32Max)},
      {"batch", "B", "with --m --n --k: batch count; with --conv: images (N) (default 1)", integer_check(1, kInt32Max)},
  };
}

CLI::Validator text_check(const std::string& what) {
  return value_check([what](const std::string& text) -> std::string {
    if (!text.empty() && text.rfind("--", 0) != 0) return "";
    return "expects " + what + "; " + got(text) + ".";
  });
}

// gemmkit tune's own options.

void Values::add_to(CLI::App& command, const std::vector<OptionRow>& table) {
  for (const OptionRow& row : table) {
    const std::string help = row.default_value.empty()
                                 ? row.help
                                 : row.help + (row.help.empty() ? "" : " ") + "(default " + row.default_value + ")";
    CLI::Option* option = command.add_option("--" + row.name, given_[row.name], help);
    option->check(row.check)->type_name(row.value);
    options_[row.name].push_back(option);
    defaults_[row.name] = row.default_value;
  }
}

}  // namespace gemmkit::cli
