// tools/gemmkit/main.cpp: the gemmkit command line (CLI11): plan, tiles, compile, run, tune, prebuild, cache, demo;
// --json everywhere.
// Every option's value is checked as it is parsed, before any GPU query or compile: a bad one is a usage error
// (exit 2). What only the plan can judge (an unsupported cc, a tile index past the plan's list) is the library's
// ConfigError (exit 1), as are toolchain and CUDA failures.
#include <cuda_runtime_api.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "gemmkit/jit.hpp"
#include "gemmkit/packs.hpp"
#include "gemmkit/runtime.hpp"
#include "gemmkit/tuning.hpp"
#include "testing/conv_reference.hpp"
#include "testing/device_buffer.hpp"
#include "testing/host_matrix.hpp"
#include "testing/shape_suite.hpp"
#include "testing/walkthrough.hpp"
#include "util/knobs.hpp"
#include "util/notes.hpp"

#include "messages.hpp"

#ifndef GEMMKIT_VERSION
#error "GEMMKIT_VERSION must be defined by the build"
#endif

namespace gk = gemmkit;
using Json = nlohmann::ordered_json;

namespace {

using gk::cli::Output;
using gk::cli::UsageError;

template <class Enum>
std::string one_of() {
  return "one of: " + gk::enum_names<Enum>();
}

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

template <class Enum>
CLI::Validator enum_check() {
  return value_check([](const std::string& text) -> std::string {
    if (gk::parse_enum<Enum>(text)) return "";
    const std::string what(gk::EnumTable<Enum>::what);
    if (text.rfind("--", 0) == 0) return "expects " + what + " (" + one_of<Enum>() + "); " + got(text) + ".";
    return "unknown " + what + " '" + text + "'; use " + one_of<Enum>() + ".";
  });
}

constexpr std::int64_t kInt32Max = INT32_MAX;

// One option: its name (without --), value name, help, the check of its value, and its value when not given ("":
// none; the library decides).
struct OptionRow {
  std::string name, value, help;
  CLI::Validator check;
  std::string default_value = {};
};

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
      {"element", "TYPE", "element type of every operand not given its own, " + one_of<gk::DataType>(),
       enum_check<gk::DataType>(), "f16"},
      {"element-a", "TYPE", "element type of A", enum_check<gk::DataType>()},
      {"element-b", "TYPE", "element type of B", enum_check<gk::DataType>()},
      {"element-c", "TYPE", "element type of C", enum_check<gk::DataType>()},
      {"element-d", "TYPE", "element type of D", enum_check<gk::DataType>()},
      {"element-accumulator", "TYPE", "accumulator type (default: C's element type)", enum_check<gk::DataType>()},
      {"layout", "LAYOUT", "layout of every operand not given its own, " + one_of<gk::Layout>() + " (or row, col)",
       enum_check<gk::Layout>(), "row"},
      {"layout-a", "LAYOUT", "layout of A", enum_check<gk::Layout>()},
      {"layout-b", "LAYOUT", "layout of B", enum_check<gk::Layout>()},
      {"layout-c", "LAYOUT", "layout of C and D", enum_check<gk::Layout>()},
      {"opclass", "CLASS", one_of<gk::OpClass>(), enum_check<gk::OpClass>()},
      {"math-operation", "MATH",
       "the kernels' math, " + one_of<gk::MathOperation>() + " (default: the family's; fast_f32 = 3xTF32)",
       enum_check<gk::MathOperation>()},
      {"swizzle", "NAME", one_of<gk::Swizzle>(), enum_check<gk::Swizzle>()},
      {"activation", "NAME", one_of<gk::Activation>(), enum_check<gk::Activation>()},
      {"activation-parameter", "X", "the leaky_relu slope (needs --activation; default 0.01)", real_check()},
      {"bias", "MODE", "a bias vector added before the activation, " + one_of<gk::BiasMode>(),
       enum_check<gk::BiasMode>()},
      {"raster-order", "ORDER", "SM90 persistent schedulers, " + one_of<gk::RasterOrder>(),
       enum_check<gk::RasterOrder>()},
      // The library's rule (Gemm::set_max_swizzle_size), checked here too so that it fails before any GPU query.
      {"max-swizzle-size", "N", "SM90 persistent schedulers: 1, 2, 4 or 8 (default: chosen per problem)",
       integer_one_of({1, 2, 4, 8})},
      {"decomposition", "MODE",
       "SM90 Stream-K kernels, " + one_of<gk::Decomposition>() + " (SplitK: --split-k-slices; default Auto)",
       enum_check<gk::Decomposition>()},
      {"reduction-mode", "MODE", "SM90 split-K / Stream-K partial sums, " + one_of<gk::ReductionMode>(),
       enum_check<gk::ReductionMode>()},
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
const std::vector<std::string> kConvSizes = {"height",       "width",  "channels", "out-channels", "filter-height",
                                             "filter-width", "stride", "pad",      "dilation"};
std::vector<OptionRow> conv_table() {
  std::vector<OptionRow> rows = {
      {"conv", "KIND", "a Conv2d instead of a GEMM, " + one_of<gk::ConvKind>(), enum_check<gk::ConvKind>()},
      {"height", "H", "with --conv: input height", integer_check(1, kInt32Max), "56"},
      {"width", "W", "with --conv: input width", integer_check(1, kInt32Max), "56"},
      {"channels", "C", "with --conv: input channels", integer_check(1, kInt32Max), "64"},
      {"out-channels", "K", "with --conv: output channels (the filter count)", integer_check(1, kInt32Max), "64"},
      {"filter-height", "R", "with --conv: filter height", integer_check(1, kInt32Max), "3"},
      {"filter-width", "S", "with --conv: filter width", integer_check(1, kInt32Max), "3"},
      {"stride", "N", "with --conv: stride (both axes)", integer_check(1, kInt32Max), "1"},
      {"pad", "N", "with --conv: zero padding on each side (both axes)", integer_check(0, kInt32Max), "1"},
      {"dilation", "N", "with --conv: dilation (both axes)", integer_check(1, kInt32Max), "1"},
      {"iterator-algorithm", "NAME", "with --conv: " + one_of<gk::IteratorAlgorithm>() + " (default: by problem)",
       enum_check<gk::IteratorAlgorithm>()},
      {"split-k-slices", "N",
       "with --conv: split-K slices (serial unless --split-k-mode says; default: by problem); else SM90 split-K slices "
       "of a Stream-K kernel (1: run() chooses)",
       integer_check(1, 65535)},
      {"split-k-mode", "NAME",
       "with --conv: " + one_of<gk::SplitKMode>() + " split-K (default: parallel for wgrad under a wave of CTAs)",
       enum_check<gk::SplitKMode>()},
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
std::vector<OptionRow> tune_table() {
  std::string groups;
  for (const auto& g : gk::testing::suite_groups()) groups += (groups.empty() ? "" : ",") + g;
  return {
      {"max-candidates", "N", "configurations compiled and timed per shape", integer_check(1, 1000), "12"},
      {"min-gain", "F",
       "a candidate replaces the heuristic's choice only when this fraction faster (0: the fastest always wins)",
       value_check([](const std::string& text) -> std::string {
         const auto value = parse_real(text);
         return value && *value >= 0 && *value < 1 ? "" : "expects a fraction in [0, 1); " + got(text) + ".";
       }),
       "0.03"},
      {"suite-groups", "LIST",
       "with --suite: the groups to tune, comma-separated, of " + groups + ", llm, all (default all)",
       value_check([](const std::string& text) -> std::string {
         try {
           (void)gk::testing::shape_suite(text);
           return "";
         } catch (const std::invalid_argument& e) {
           return std::string(e.what()) + ".";
         }
       })},
      {"export", "FILE", "write the tuning database as JSON to FILE (- for stdout), then stop", text_check("a file")},
      {"import", "FILE", "add the entries of a JSON file written by --export to the tuning database, then stop",
       text_check("a file")},
  };
}

// gemmkit run: the problem, alpha and beta, repetitions, groups.
std::vector<OptionRow> run_table() {
  auto rows = problem_table();
  for (auto& row :
       std::vector<OptionRow>{{"alpha", "X", "D = alpha * A@B + beta * C", real_check(), "1"},
                              {"beta", "X", "", real_check(), "0"},
                              {"repeat", "N", "timed runs after the first", integer_check(1, 1000000), "10"},
                              {"groups", "G", "with --grouped: problems in one launch, M rows each drawn from [1, --m]",
                               integer_check(1, 1000000), "16"}}) {
    rows.push_back(std::move(row));
  }
  return rows;
}

// The options' values as given, checked by CLI11 as it parsed them; shared by every command that takes them.
class Values {
 public:
  void add_to(CLI::App& command, const std::vector<OptionRow>& table) {
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

  bool given(const std::string& name) const {
    const auto& options = options_.at(name);
    return std::any_of(options.begin(), options.end(), [](const CLI::Option* o) { return o->count() > 0; });
  }
  // The value given, else the option's default, else nullopt.
  std::optional<std::string> text(const std::string& name) const {
    if (given(name)) return given_.at(name);
    if (!defaults_.at(name).empty()) return defaults_.at(name);
    return std::nullopt;
  }
  std::optional<std::int64_t> integer(const std::string& name) const { return typed(name, parse_integer); }
  std::optional<double> real(const std::string& name) const { return typed(name, parse_real); }
  template <class Enum>
  std::optional<Enum> enumerator(const std::string& name) const {
    return typed(name, [](const std::string& t) { return gk::parse_enum<Enum>(t); });
  }

 private:
  template <class Parse>
  auto typed(const std::string& name, Parse parse) const -> decltype(parse(std::string())) {
    const std::optional<std::string> value = text(name);
    if (!value) return std::nullopt;
    if (auto parsed = parse(*value)) return parsed;
    throw gk::Error("internal error: --" + name + " '" + *value + "' passed its check but does not parse");
  }

  // Node-based maps: CLI11 keeps pointers to the strings.
  std::map<std::string, std::string> given_, defaults_;
  std::map<std::string, std::vector<CLI::Option*>> options_;
};

// Runs one of the plan's setters; its ConfigError names the option that asked for the change.
template <class Set>
void apply(const Values& args, const std::string& name, Set set) {
  try {
    set();
  } catch (const gk::ConfigError& e) {
    throw gk::ConfigError("--" + name + " " + *args.text(name) + ": " + e.what());
  }
}

// A Gemm, or with --grouped a GroupedGemm (the same configuration options); `adjust` may change the options first.
std::unique_ptr<gk::Gemm> make_plan(const Values& args, bool grouped,
                                    const std::function<void(gk::GemmOptions&)>& adjust = {}) {
  gk::GemmOptions o;
  o.element = args.enumerator<gk::DataType>("element");
  o.element_a = args.enumerator<gk::DataType>("element-a");
  o.element_b = args.enumerator<gk::DataType>("element-b");
  o.element_c = args.enumerator<gk::DataType>("element-c");
  o.element_d = args.enumerator<gk::DataType>("element-d");
  o.element_accumulator = args.enumerator<gk::DataType>("element-accumulator");
  o.layout = args.enumerator<gk::Layout>("layout");
  o.layout_a = args.enumerator<gk::Layout>("layout-a");
  o.layout_b = args.enumerator<gk::Layout>("layout-b");
  o.layout_c = args.enumerator<gk::Layout>("layout-c");
  if (auto cc = args.integer("cc")) o.cc = static_cast<int>(*cc);
  if (auto kernel_cc = args.integer("kernel-cc")) o.kernel_cc = static_cast<int>(*kernel_cc);
  if (adjust) adjust(o);
  std::unique_ptr<gk::Gemm> owned;
  if (auto kind = args.enumerator<gk::ConvKind>("conv")) {
    if (grouped) throw UsageError("--conv and --grouped: a plan is one or the other.");
    gk::Conv2dOptions c;
    c.kind = *kind;
    c.element = o.element;
    c.element_a = o.element_a;
    c.element_b = o.element_b;
    c.element_c = o.element_c;
    c.element_d = o.element_d;
    c.element_accumulator = o.element_accumulator;
    c.cc = o.cc;
    c.kernel_cc = o.kernel_cc;
    auto conv = std::make_unique<gk::Conv2d>(c);
    if (auto algorithm = args.enumerator<gk::IteratorAlgorithm>("iterator-algorithm")) {
      apply(args, "iterator-algorithm", [&] { conv->set_iterator_algorithm(*algorithm); });
    }
    const auto split_mode = args.enumerator<gk::SplitKMode>("split-k-mode");
    const auto slices = args.integer("split-k-slices");
    if (split_mode || slices) {
      apply(args, split_mode ? "split-k-mode" : "split-k-slices", [&] {
        conv->set_split_k(split_mode.value_or(gk::SplitKMode::Serial), static_cast<int>(slices.value_or(0)));
      });
    }
    owned = std::move(conv);
  } else {
    owned = grouped ? std::make_unique<gk::GroupedGemm>(o) : std::make_unique<gk::Gemm>(o);
  }
  gk::Gemm& plan = *owned;
  if (auto opclass = args.enumerator<gk::OpClass>("opclass")) {
    apply(args, "opclass", [&] { plan.set_opclass(*opclass); });
  }
  if (auto math = args.enumerator<gk::MathOperation>("math-operation")) {
    apply(args, "math-operation", [&] { plan.set_math_operation(*math); });
  }
  if (auto swizzle = args.enumerator<gk::Swizzle>("swizzle")) {
    apply(args, "swizzle", [&] { plan.set_swizzling_functor(*swizzle); });
  }
  if (auto activation = args.enumerator<gk::Activation>("activation")) {
    const auto slope = args.real("activation-parameter");
    apply(args, "activation",
          [&] { slope ? plan.set_activation(*activation, *slope) : plan.set_activation(*activation); });
  }
  if (auto bias = args.enumerator<gk::BiasMode>("bias")) apply(args, "bias", [&] { plan.set_bias(*bias); });
  if (auto order = args.enumerator<gk::RasterOrder>("raster-order")) {
    apply(args, "raster-order", [&] { plan.set_raster_order(*order); });
  }
  if (auto size = args.integer("max-swizzle-size")) {
    apply(args, "max-swizzle-size", [&] { plan.set_max_swizzle_size(static_cast<int>(*size)); });
  }
  if (auto mode = args.enumerator<gk::Decomposition>("decomposition")) {
    apply(args, "decomposition", [&] { plan.set_decomposition(*mode); });
  }
  if (auto mode = args.enumerator<gk::ReductionMode>("reduction-mode")) {
    apply(args, "reduction-mode", [&] { plan.set_reduction_mode(*mode); });
  }
  if (auto index = args.integer("tile")) {
    const auto tiles = plan.tile_descriptions();
    if (*index >= static_cast<std::int64_t>(tiles.size())) {
      throw gk::ConfigError("--tile " + std::to_string(*index) + " is out of range: the plan has " +
                            std::to_string(tiles.size()) + " configurations, 0 to " + std::to_string(tiles.size() - 1) +
                            " (see gemmkit tiles).");
    }
    apply(args, "tile", [&] { plan.set_tile_description(tiles[static_cast<std::size_t>(*index)]); });
  }
  const bool conv = args.enumerator<gk::ConvKind>("conv").has_value();
  if (auto slices = args.integer("split-k-slices"); slices && !conv) {
    apply(args, "split-k-slices", [&] { plan.set_split_k_slices(static_cast<int>(*slices)); });
  }
  return owned;
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

// The Conv2d problem the options give (defaults, conv_table's: a 3x3 conv of 64 channels on 1 x 56 x 56).
gk::testing::ConvShape conv_shape(const Values& args) {
  gk::testing::ConvShape shape;
  shape.n = args.integer("batch").value_or(1);
  shape.h = *args.integer("height");
  shape.w = *args.integer("width");
  shape.c = *args.integer("channels");
  shape.k = *args.integer("out-channels");
  shape.r = *args.integer("filter-height");
  shape.s = *args.integer("filter-width");
  const int stride = static_cast<int>(*args.integer("stride"));
  const int pad = static_cast<int>(*args.integer("pad"));
  const int dilation = static_cast<int>(*args.integer("dilation"));
  shape.geometry = {{stride, stride}, {pad, pad}, {dilation, dilation}};
  return shape;
}

bool conv_sizes_given(const Values& args) {
  return args.given("batch") ||
         std::any_of(kConvSizes.begin(), kConvSizes.end(), [&](const std::string& name) { return args.given(name); });
}

// The kernel a Conv2d plan runs for the options' problem (nothing runs, no GPU needed: the views are never read).
gk::KernelSpec conv_spec_for(gk::Conv2d& plan, const Values& args) {
  const auto shape = conv_shape(args);
  gk::Conv2d::output_size(shape.input(), shape.filter(), shape.geometry);  // its ConfigError first
  const gk::ConvKind kind = plan.kind();
  // An aligned address that is never dereferenced: spec_for checks addresses for alignment only.
  void* const address = reinterpret_cast<void*>(std::uintptr_t{1} << 20);
  auto view = [&](gk::DataType type, const gk::testing::Extent4& e) {
    gk::TensorView v =
        gk::TensorView::strided(address, type, {e[0], e[1], e[2], e[3]}, {e[1] * e[2] * e[3], e[2] * e[3], e[3], 1});
    return v;
  };
  const gk::TensorView a = view(plan.element_a(), shape.a(kind)), b = view(plan.element_b(), shape.b(kind)),
                       d = view(plan.element_d(), shape.d(kind));
  return plan.spec_for(a, b, nullptr, d, shape.geometry);
}

// A GEMM's problem from --m --n --k (--batch, default 1); nullopt without --m.
struct GemmExtents {
  std::int64_t m, n, k, batch;
};
std::optional<GemmExtents> gemm_extents(const Values& args) {
  if (!args.given("m")) return std::nullopt;
  return GemmExtents{*args.integer("m"), *args.integer("n"), *args.integer("k"),
                     args.given("batch") ? *args.integer("batch") : 1};
}

// The kernel run() picks for the options' problem (--conv sizes, or a GEMM's --m --n --k); nullopt without one.
std::optional<gk::KernelSpec> sized_spec(gk::Gemm& plan, const Values& args) {
  if (auto* conv = dynamic_cast<gk::Conv2d*>(&plan); conv != nullptr && conv_sizes_given(args)) {
    return conv_spec_for(*conv, args);
  }
  const auto e = gemm_extents(args);
  if (!e) return std::nullopt;
  return plan.spec_for_problem(e->m, e->n, e->k, e->batch);
}

int cmd_plan(const Values& args, bool grouped, bool print_source, const Output& output) {
  const auto owned = make_plan(args, grouped);
  gk::Gemm& plan = *owned;
  const gk::KernelSpec spec = sized_spec(plan, args).value_or(plan.spec());
  Json out = spec;
  std::string text = "kernel: " + spec.name() + "\ncc " + std::to_string(spec.cc) + ", " +
                     std::string(gk::to_string(spec.opclass)) + ", " + std::string(gk::to_string(spec.family)) +
                     "\ntile:\n" + spec.tile.to_string() + "\n";
  if (const auto e = gemm_extents(args)) {  // a GEMM's problem: also what run() passes that kernel
    const auto [a, b, d] = plan.stand_in_tensors(e->m, e->n, e->k, e->batch);
    const gk::KSplit split = plan.k_split_for(a, b, nullptr, d);
    const int swizzle = plan.max_swizzle_for(a, b, nullptr, d);
    out["run"] = {
        {"decomposition", gk::to_string(split.mode)}, {"splits", split.splits}, {"max_swizzle_size", swizzle}};
    text += "run(): " + std::string(gk::to_string(split.mode)) +
            (split.splits > 1 ? " into " + std::to_string(split.splits) + " slices" : std::string()) +
            (swizzle > 0 ? ", scheduler swizzle " + std::to_string(swizzle) : std::string()) + "\n";
  }
  if (print_source) {
    const std::string source = gk::render(spec).text;
    out["source"] = source;
    text += "\n" + source;
  }
  output.print(out, text);
  return 0;
}

// Text columns padded to their widest cell.
std::string table_text(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c] + (c + 1 < row.size() ? std::string(width[c] - row[c].size() + 2, ' ') : "");
    }
    out += line + "\n";
  }
  return out;
}

// One line per configuration: index, CTA tile, cluster, stages, schedules and what it adds to the kernels' shared
// name prefix (printed once, above).
int cmd_tiles(const Values& args, bool grouped, const Output& output) {
  const auto owned = make_plan(args, grouped);
  gk::Gemm& plan = *owned;
  const auto tiles = plan.tile_descriptions();
  std::vector<std::string> names;
  for (const auto& tile : tiles) {
    gk::KernelSpec spec = plan.spec();
    spec.tile = tile;
    names.push_back(spec.name());
  }
  // The prefix every name shares, cut after its last '_'.
  std::string prefix = names.empty() ? "" : names.front();
  for (const std::string& name : names) {
    prefix.resize(std::mismatch(prefix.begin(), prefix.end(), name.begin(), name.end()).first - prefix.begin());
  }
  prefix.resize(prefix.rfind('_') == std::string::npos ? 0 : prefix.rfind('_') + 1);
  std::vector<std::vector<std::string>> rows = {
      {"#", "cta tile", "cluster", "stages", "kernel schedule", "epilogue schedule", "tile scheduler", prefix + "..."}};
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    const gk::TileDescription& t = tiles[i];
    rows.push_back({std::to_string(i), gk::shape_text(t.cta_tile()), gk::shape_text(t.cluster_shape),
                    t.stages == 0 ? "auto" : std::to_string(t.stages), std::string(gk::to_string(t.kernel_schedule)),
                    std::string(gk::to_string(t.epilogue_schedule)), std::string(gk::to_string(t.tile_scheduler)),
                    names[i].substr(prefix.size())});
  }
  Json records = Json::array();
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    Json record = tiles[i];
    record["cta_tile"] = tiles[i].cta_tile();
    record["kernel_name"] = names[i];
    records.push_back(record);
  }
  output.print({{"count", tiles.size()}, {"tile_descriptions", records}}, table_text(rows));
  return 0;
}

int cmd_compile(const Values& args, bool grouped, const Output& output) {
  const auto owned = make_plan(args, grouped);
  gk::Gemm& plan = *owned;
  const std::optional<gk::KernelSpec> sized = sized_spec(plan, args);
  const gk::CompiledKernel built = sized ? gk::build_kernel(*sized) : plan.compile();
  output.print(built, "kernel: " + built.kernel_name + "\ncache:  " +
                          (built.cache_hit ? "hit" : "miss (compiled in " + fixed(built.build_seconds, 1) + " s)") +
                          "\nmodule: " + built.module_path + "\n");
  return 0;
}

// Commands that launch kernels ask for a GPU before they allocate anything: the user reads what works without one,
// not a failed cudaMalloc.
void require_gpu(const std::string& need, const std::string& without) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return;
  cudaGetLastError();  // clear the sticky "no device" status
  throw gk::CudaError(need + "; none found (cudaGetDeviceCount: " +
                          (status == cudaSuccess ? std::string("no devices") : cudaGetErrorName(status)) + "). " +
                          without,
                      static_cast<int>(status == cudaSuccess ? cudaErrorNoDevice : status));
}

// gemmkit run's plan. Given --cc, the plan's rules are checked before the GPU is asked for, so that a bad option
// reads as such on any machine; without --cc the plan asks the GPU for its compute capability.
std::unique_ptr<gk::Gemm> plan_to_run(const Values& args, bool grouped) {
  const auto need_gpu = [] {
    require_gpu("gemmkit run needs a CUDA GPU", "`gemmkit compile` and `gemmkit plan` work without one.");
  };
  if (!args.given("cc")) need_gpu();
  auto plan = make_plan(args, grouped);
  need_gpu();
  return plan;
}

struct Problem {
  std::int64_t m, n, k, batch, repeat;
  double alpha, beta;
};

// gemmkit run's sizes: every operand, batch included, within 2^31-1 elements (so every product fits, and no host
// or device buffer is larger than 16 GiB). Checked before the plan is made.
Problem run_problem(const Values& args) {
  const Problem p{*args.integer("m"),      *args.integer("n"),  *args.integer("k"), *args.integer("batch"),
                  *args.integer("repeat"), *args.real("alpha"), *args.real("beta")};
  for (const auto& [operand, rows, cols, names] :
       {std::tuple{"A", p.m, p.k, "--m, --k"}, {"B", p.k, p.n, "--k, --n"}, {"C and D", p.m, p.n, "--m, --n"}}) {
    // Each factor is at most 2^31-1, so the first product cannot overflow; the second is checked by division.
    const std::int64_t matrix = rows * cols;
    if (matrix > kInt32Max / p.batch) {
      throw UsageError(std::string(names) + " and --batch: " + operand + " would hold " + std::to_string(rows) + " x " +
                       std::to_string(cols) + " x " + std::to_string(p.batch) +
                       " elements; gemmkit run takes at most 2147483647 (2^31-1) per operand.");
    }
  }
  return p;
}

// gemmkit run --grouped: --groups problems of M rows drawn from [1, --m] (N and K as given), in one launch.
int cmd_run_grouped(const Values& args, bool check, const Output& output) {
  using gk::testing::DeviceBuffer;
  using gk::testing::HostMatrix;
  const Problem r = run_problem(args);
  if (r.batch != 1) throw UsageError("--batch: a grouped run takes one matrix per group; use --groups.");
  const std::int64_t groups = *args.integer("groups");
  if (groups * r.m * std::max(r.n, r.k) > kInt32Max) {
    throw UsageError("--groups, --m, --n, --k: the groups would hold more than 2147483647 (2^31-1) elements.");
  }
  const auto owned = plan_to_run(args, true);
  auto& plan = static_cast<gk::GroupedGemm&>(*owned);
  std::mt19937_64 random(2023);
  std::vector<HostMatrix> A, B, C, D;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<gk::TensorView> a, b, c, d;
  double flops = 0;
  const int ab = gk::bits_of(plan.element_accumulator()) <= 16 ? 1 : 4;  // see cmd_run
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t m = 1 + static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(r.m));
    A.emplace_back(plan.element_a(), m, r.k, plan.layout_a());
    B.emplace_back(plan.element_b(), r.k, r.n, plan.layout_b());
    C.emplace_back(plan.element_c(), m, r.n, plan.layout_c());
    D.emplace_back(plan.element_d(), m, r.n, plan.layout_c());
    A.back().fill_integers(4 * g, -ab, ab);
    B.back().fill_integers(4 * g + 1, -ab, ab);
    C.back().fill_integers(4 * g + 2, -4, 4);
    flops += 2.0 * m * r.n * r.k;
  }
  for (auto* list : {&A, &B, &C, &D}) {
    auto& views = list == &A ? a : list == &B ? b : list == &C ? c : d;
    for (const HostMatrix& host : *list) {
      buffers.push_back(std::make_unique<DeviceBuffer>(host));
      views.push_back(buffers.back()->view_like(host));
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  plan.run(a, b, c, d, r.alpha, r.beta);  // first run: compile or load
  const double first_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  gk::RunOptions options;
  options.sync = false;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (std::int64_t i = 0; i < r.repeat; ++i) plan.run(a, b, c, d, r.alpha, r.beta, options);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, start, stop);
  const double seconds = ms / 1e3 / static_cast<double>(r.repeat);
  Json out = {{"kernel_name", plan.kernel_name()},
              {"groups", groups},
              {"m_max", r.m},
              {"n", r.n},
              {"k", r.k},
              {"first_run_seconds", first_seconds},
              {"seconds_per_run", seconds},
              {"tflops", flops / seconds / 1e12}};
  std::string text = "kernel: " + plan.kernel_name() + "\n" + std::to_string(groups) +
                     " groups; first run (compile or load): " + fixed(first_seconds, 1) + " s\n" +
                     fixed(flops / seconds / 1e12, 1) + " TFLOP/s, " + fixed(seconds * 1e6, 1) + " us per run\n";
  if (!check) {
    output.print(out, text);
    return 0;
  }
  std::int64_t wrong = 0;
  for (std::size_t g = 0; g < D.size(); ++g) {
    buffers[3 * D.size() + g]->copy_to(D[g]);
    const std::int64_t samples = D[g].rows() * D[g].cols() <= (1 << 14) ? 0 : 512;
    const gk::testing::Epilogue epilogue{plan.activation(), plan.activation_parameter(), nullptr, gk::BiasMode::None};
    const auto cmp =
        gk::testing::compare_with_reference(A[g], B[g], &C[g], D[g], r.alpha, r.beta, samples, g, epilogue);
    wrong += cmp.max_rel_error > (gk::bits_of(plan.element_d()) <= 16 ? 1e-2 : 1e-6) ? 1 : 0;
  }
  out["groups_wrong"] = wrong;
  out["check"] = wrong == 0 ? "pass" : "fail";
  text += "check: " + std::string(wrong == 0 ? "pass" : "FAIL") + " (" + std::to_string(wrong) + " of " +
          std::to_string(groups) + " groups differ from the float64 reference)\n";
  output.print(out, text);
  return wrong == 0 ? 0 : 1;
}

// gemmkit run --conv KIND: one convolution on small-integer data, timed; --check compares every element of D with
// the float64 reference.
int cmd_run_conv(gk::Conv2d& plan, const Values& args, bool check, const Output& output) {
  using gk::testing::DeviceBuffer;
  using gk::testing::HostMatrix;
  const auto shape = conv_shape(args);
  gk::Conv2d::output_size(shape.input(), shape.filter(), shape.geometry);
  const gk::ConvKind kind = plan.kind();
  const std::int64_t repeat = *args.integer("repeat");
  const double alpha = *args.real("alpha"), beta = *args.real("beta");
  HostMatrix A = gk::testing::conv_tensor(plan.element_a(), shape.a(kind));
  HostMatrix B = gk::testing::conv_tensor(plan.element_b(), shape.b(kind));
  HostMatrix C = gk::testing::conv_tensor(plan.element_c(), shape.d(kind));
  HostMatrix D = gk::testing::conv_tensor(plan.element_d(), shape.d(kind));
  const int ab = gk::bits_of(plan.element_accumulator()) <= 16 ? 1 : 2;
  A.fill_integers(1, -ab, ab);
  B.fill_integers(2, -ab, ab);
  C.fill_integers(3, -4, 4);
  const DeviceBuffer dA(A), dB(B), dC(C), dD(D);
  const int device = gk::current_device();
  const auto vA = gk::testing::conv_view(A, shape.a(kind), dA.get(), device);
  const auto vB = gk::testing::conv_view(B, shape.b(kind), dB.get(), device);
  const auto vC = gk::testing::conv_view(C, shape.d(kind), dC.get(), device);
  const auto vD = gk::testing::conv_view(D, shape.d(kind), dD.get(), device);
  const gk::KernelSpec spec = plan.spec_for(vA, vB, &vC, vD, shape.geometry, beta);
  const gk::Conv2dSplitK split = plan.split_k_for(vA, vB, &vC, vD, shape.geometry, beta);
  gk::RunOptions options;
  const auto t0 = std::chrono::steady_clock::now();
  plan.run(vA, vB, &vC, vD, shape.geometry, alpha, beta, options);  // first run: compile or load
  const double first_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  dD.copy_to(D);  // before the timed runs: with beta != 0 each run reads C, so D is the same, but keep the first
  options.sync = false;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (std::int64_t i = 0; i < repeat; ++i) plan.run(vA, vB, &vC, vD, shape.geometry, alpha, beta, options);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, start, stop);
  const double seconds = ms / 1e3 / static_cast<double>(repeat);
  const double tflops = shape.flops() / seconds / 1e12;
  Json out = {{"kernel_name", spec.name()},
              {"conv", gk::to_string(kind)},
              {"n", shape.n},
              {"h", shape.h},
              {"w", shape.w},
              {"c", shape.c},
              {"k", shape.k},
              {"r", shape.r},
              {"s", shape.s},
              {"p", shape.p()},
              {"q", shape.q()},
              {"split_k_mode", gk::to_string(split.mode)},
              {"split_k_slices", split.slices},
              {"first_run_seconds", first_seconds},
              {"seconds_per_run", seconds},
              {"tflops", tflops}};
  std::string text = "kernel: " + spec.name() + "\nsplit-K: " + std::string(gk::to_string(split.mode)) + " x" +
                     std::to_string(split.slices) + "\nfirst run (compile or load): " + fixed(first_seconds, 1) +
                     " s\n" + fixed(tflops, 1) + " TFLOP/s\n";
  if (!check) {
    output.print(out, text);
    return 0;
  }
  const gk::testing::Epilogue epilogue{plan.activation(), plan.activation_parameter(), nullptr, gk::BiasMode::None};
  const auto cmp = gk::testing::compare_conv(kind, shape, A, B, &C, D, alpha, beta, epilogue);
  const bool ok = cmp.max_rel_error <= (gk::bits_of(plan.element_d()) <= 16 ? 1e-2 : 1e-6);
  out["checked"] = cmp.checked;
  out["max_abs_error"] = cmp.max_abs_error;
  out["check"] = ok ? "pass" : "fail";
  text += "check: " + std::string(ok ? "pass" : "FAIL") + " (max abs error " + std::to_string(cmp.max_abs_error) +
          " over " + std::to_string(cmp.checked) + " elements)\n";
  output.print(out, text);
  return ok ? 0 : 1;
}

int cmd_run(const Values& args, bool check, const Output& output) {
  using gk::testing::DeviceBuffer;
  using gk::testing::HostMatrix;
  const bool grouped = false;
  if (args.given("conv")) {
    const auto owned = plan_to_run(args, grouped);
    return cmd_run_conv(dynamic_cast<gk::Conv2d&>(*owned), args, check, output);
  }
  const Problem r = run_problem(args);
  const auto owned = plan_to_run(args, grouped);
  gk::Gemm& plan = *owned;
  HostMatrix A(plan.element_a(), r.m, r.k, plan.layout_a(), r.batch);
  HostMatrix B(plan.element_b(), r.k, r.n, plan.layout_b(), r.batch);
  HostMatrix C(plan.element_c(), r.m, r.n, plan.layout_c(), r.batch);
  HostMatrix D(plan.element_d(), r.m, r.n, plan.layout_c(), r.batch);
  // Small integers: every product and sum is exact in the accumulator, so only D's rounding remains. A 16-bit
  // accumulator holds integers exactly up to 2048 only: there A and B take -1, 0 and 1 (sums of K terms then stay
  // within a few sqrt(K), far below 2048 for any K this command takes in practice).
  const int ab = gk::bits_of(plan.element_accumulator()) <= 16 ? 1 : 4;
  A.fill_integers(1, -ab, ab);
  B.fill_integers(2, -ab, ab);
  C.fill_integers(3, -4, 4);
  const bool per_row = plan.bias() == gk::BiasMode::PerRow;
  HostMatrix bias(plan.element_c(), 1, per_row ? r.m : r.n, gk::Layout::RowMajor);
  bias.fill_integers(4, -4, 4);
  const DeviceBuffer dA(A), dB(B), dC(C), dD(D), dBias(bias);
  const gk::TensorView vA = dA.view_like(A), vB = dB.view_like(B), vC = dC.view_like(C), vD = dD.view_like(D);
  const gk::TensorView vBias = dBias.view_like(bias);
  gk::RunOptions options;
  options.bias = plan.bias() == gk::BiasMode::None ? nullptr : &vBias;
  const auto t0 = std::chrono::steady_clock::now();
  plan.run(vA, vB, &vC, vD, r.alpha, r.beta, options);  // first run: compile or load
  const double first_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  options.sync = false;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (std::int64_t i = 0; i < r.repeat; ++i) plan.run(vA, vB, &vC, vD, r.alpha, r.beta, options);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, start, stop);
  const double seconds = ms / 1e3 / static_cast<double>(r.repeat);
  const double tflops = 2.0 * r.m * r.n * r.k * r.batch / seconds / 1e12;
  dD.copy_to(D);
  Json out = {{"kernel_name", plan.kernel_name()},
              {"m", r.m},
              {"n", r.n},
              {"k", r.k},
              {"batch", r.batch},
              {"first_run_seconds", first_seconds},
              {"seconds_per_run", seconds},
              {"tflops", tflops}};
  std::string text = "kernel: " + plan.kernel_name() + "\nfirst run (compile or load): " + fixed(first_seconds, 1) +
                     " s\n" + fixed(tflops, 1) + " TFLOP/s\n";
  if (!check) {
    output.print(out, text);
    return 0;
  }
  const std::int64_t samples = r.m * r.n * r.batch <= (1 << 18) ? 0 : 4096;
  const gk::testing::Epilogue epilogue{plan.activation(), plan.activation_parameter(),
                                       options.bias != nullptr ? &bias : nullptr, plan.bias()};
  const auto cmp = gk::testing::compare_with_reference(A, B, &C, D, r.alpha, r.beta, samples, 1, epilogue);
  const bool ok = cmp.max_rel_error <= (gk::bits_of(plan.element_d()) <= 16 ? 1e-2 : 1e-6);
  out["checked"] = cmp.checked;
  out["max_abs_error"] = cmp.max_abs_error;
  out["max_rel_error"] = cmp.max_rel_error;
  out["check"] = ok ? "pass" : "fail";
  text += "check: " + std::string(ok ? "pass" : "FAIL") + " (max abs error " + std::to_string(cmp.max_abs_error) +
          " over " + std::to_string(cmp.checked) + " elements)\n";
  output.print(out, text);
  return ok ? 0 : 1;
}

// The kernels of --pack NAME or --pack-file FILE (one of them must be given).
std::vector<gk::KernelSpec> pack_of(const std::string& pack, const std::string& pack_file, const char* command) {
  if (pack.empty() == pack_file.empty()) {
    throw UsageError(std::string(command) + " needs one of --pack NAME, --pack-file FILE.");
  }
  return pack.empty() ? gk::read_pack_file(pack_file) : gk::pack_specs(pack);
}

// Builds a pack into the cache in parallel, showing progress on stderr (a bar on a terminal, lines otherwise).
int cmd_prebuild(const std::string& pack, const std::string& pack_file, bool quiet, const Output& output) {
  const std::vector<gk::KernelSpec> specs = pack_of(pack, pack_file, "gemmkit prebuild");
  const auto start = std::chrono::steady_clock::now();
  const auto style = quiet || output.json ? gk::ProgressStyle::Quiet : gk::default_progress_style();
  const std::vector<gk::CompiledKernel> built = gk::compile_many(specs, gk::progress_printer(style));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto misses = std::count_if(built.begin(), built.end(), [](const auto& k) { return !k.cache_hit; });
  Json out = {{"pack", pack.empty() ? pack_file : pack},
              {"kernels", built.size()},
              {"built", misses},
              {"seconds", seconds},
              {"cache", gk::DiskCache().root()},
              {"list", built}};
  output.print(out, "pack " + (pack.empty() ? pack_file : pack) + ": " + std::to_string(built.size()) + " kernels, " +
                        std::to_string(misses) + " built, " + std::to_string(built.size() - misses) +
                        " already in the cache " + gk::DiskCache().root() + " (" + fixed(seconds, 1) + " s)\n");
  return 0;
}

// Row-major-or-as-declared operands of the plan's types on the GPU, uniform in [-1, 1), for one tuning problem.
struct TuneOperands {
  TuneOperands(const gk::Gemm& plan, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch)
      : A(plan.element_a(), m, k, plan.layout_a(), batch),
        B(plan.element_b(), k, n, plan.layout_b(), batch),
        D(plan.element_d(), m, n, plan.layout_c(), batch) {
    A.fill_uniform(11);
    B.fill_uniform(12);
    dA = std::make_unique<gk::testing::DeviceBuffer>(A);
    dB = std::make_unique<gk::testing::DeviceBuffer>(B);
    dD = std::make_unique<gk::testing::DeviceBuffer>(D);
  }
  gk::testing::HostMatrix A, B, D;
  std::unique_ptr<gk::testing::DeviceBuffer> dA, dB, dD;
};

Json tune_shape(gk::Gemm& plan, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                const gk::TuneOptions& options, std::string& text) {
  TuneOperands o(plan, m, n, k, batch);
  const gk::TuneResult result =
      plan.tune(o.dA->view_like(o.A), o.dB->view_like(o.B), nullptr, o.dD->view_like(o.D), options);
  Json out = result;
  const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  out["m"] = m;
  out["n"] = n;
  out["k"] = k;
  out["batch"] = batch;
  const double flops = 2.0 * m * n * k * batch;
  text += shape + ": heuristic " + fixed(flops / result.heuristic_ms / 1e9, 1) + " TFLOP/s, best " +
          fixed(flops / result.winner().ms / 1e9, 1) + " TFLOP/s (x" +
          fixed(result.heuristic_ms / result.winner().ms, 3) + ") " + result.winner().kernel_name + ", " +
          fixed(result.seconds, 1) + " s\n";
  return out;
}

// gemmkit tune: one shape (--m --n --k), the shape suite (--suite), or the database's --export / --import.
int cmd_tune(const Values& args, bool suite, bool prebuild, const Output& output) {
  if (auto file = args.text("export")) {
    const Json document = gk::tuning::Database().export_json();
    if (*file == "-") {
      std::cout << document.dump(2) << "\n";
      return 0;
    }
    std::ofstream stream(*file);
    stream << document.dump(2) << "\n";
    if (!stream.flush()) throw gk::Error("Cannot write " + *file + ".");
    output.print({{"exported", document.at("entries").size()}, {"file", *file}},
                 "exported " + std::to_string(document.at("entries").size()) + " entries to " + *file + "\n");
    return 0;
  }
  if (auto file = args.text("import")) {
    std::ifstream stream(*file);
    if (!stream) throw UsageError("--import: cannot read " + *file + ".");
    const Json document = Json::parse(stream, nullptr, false);
    if (document.is_discarded()) throw gk::ConfigError("--import: " + *file + " is not JSON.");
    gk::tuning::Database database;
    const std::size_t count = database.import_json(document);
    output.print({{"imported", count}, {"database", database.path()}},
                 "imported " + std::to_string(count) + " entries into " + database.path() + "\n");
    return 0;
  }
  if (prebuild && !suite) throw UsageError("--prebuild needs --suite (a shape's candidates build as it is tuned).");
  if (prebuild && !args.given("cc")) throw UsageError("--prebuild needs --cc: the GPU the candidates are for.");
  // Tuning times kernels: without a GPU, say so before anything is allocated (--prebuild only compiles).
  if (!prebuild) {
    require_gpu("gemmkit tune measures kernels, so it needs a CUDA GPU",
                "`gemmkit tune --suite --prebuild --cc N` compiles the candidates without one.");
  }
  gk::TuneOptions options;
  options.max_candidates = static_cast<int>(*args.integer("max-candidates"));
  options.min_gain = *args.real("min-gain");
  options.progress = [](const std::string& line) { std::cerr << "  " << line << "\n"; };
  std::string text;
  if (!suite) {
    const Problem r = run_problem(args);
    const auto plan = make_plan(args, false);
    Json out = tune_shape(*plan, r.m, r.n, r.k, r.batch, options, text);
    output.print(out, text + "database: " + out.value("database", "") + "\n");
    return 0;
  }
  // The suite: f16 and bf16 (unless --element says) with f32 accumulation (unless --element-accumulator says), every
  // kernel compiled first in one parallel batch.
  std::vector<gk::DataType> elements = {gk::DataType::f16, gk::DataType::bf16};
  if (args.given("element")) elements = {*args.enumerator<gk::DataType>("element")};
  const auto shapes = gk::testing::shape_suite(args.text("suite-groups").value_or(""));
  std::vector<std::unique_ptr<gk::Gemm>> plans;
  std::map<std::string, gk::KernelSpec> unique;
  for (const gk::DataType element : elements) {
    plans.push_back(make_plan(args, false, [&](gk::GemmOptions& o) {
      o.element = element;
      if (!args.given("element-accumulator")) o.element_accumulator = gk::DataType::f32;
    }));
    gk::Gemm& plan = *plans.back();
    void* placeholder = reinterpret_cast<void*>(std::uintptr_t{1} << 20);  // 1 MiB: aligned like cudaMalloc
    for (const auto& s : shapes) {
      const auto A = gk::TensorView::on_gpu(placeholder, plan.element_a(), {s.m, s.k}, plan.layout_a());
      const auto B = gk::TensorView::on_gpu(placeholder, plan.element_b(), {s.k, s.n}, plan.layout_b());
      const auto D = gk::TensorView::on_gpu(placeholder, plan.element_d(), {s.m, s.n}, plan.layout_c());
      for (const auto& spec : plan.tune_candidates(A, B, nullptr, D, options)) unique.emplace(spec.canonical(), spec);
    }
  }
  std::vector<gk::KernelSpec> specs;
  for (const auto& [key, spec] : unique) specs.push_back(spec);
  std::cerr << "compiling " << specs.size() << " kernels for " << shapes.size() * elements.size()
            << " problems (cached ones cost nothing) ...\n";
  const auto start = std::chrono::steady_clock::now();
  const auto compiled = gk::compile_many(specs);
  if (prebuild) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Each kernel's cache key and name: what a build machine carries to the GPU machine (tools/dev/carry-cache --keys).
    std::string listing;
    for (const auto& kernel : compiled) listing += "  " + kernel.cache_key + " " + kernel.kernel_name + "\n";
    output.print(
        {{"kernels", specs.size()}, {"seconds", seconds}, {"cache", gk::DiskCache().root()}, {"list", compiled}},
        listing + "built the suite's " + std::to_string(specs.size()) + " candidates into " + gk::DiskCache().root() +
            " in " + fixed(seconds, 0) + " s\n");
    return 0;
  }
  Json results = Json::array();
  for (std::size_t p = 0; p < plans.size(); ++p) {
    for (const auto& s : shapes) {
      std::cerr << gk::to_string(elements[p]) << " " << s.group << " " << s.text() << " ...\n";
      text += std::string(gk::to_string(elements[p])) + " " + s.group + " ";
      Json row;
      try {
        row = tune_shape(*plans[p], s.m, s.n, s.k, 1, options, text);
      } catch (const gk::ConfigError& e) {  // a shape tune() does not take (parallel split-K): reported, not fatal
        text += s.text() + ": skipped: " + e.what() + "\n";
        row = {{"m", s.m}, {"n", s.n}, {"k", s.k}, {"skipped", e.what()}};
      }
      row["element"] = gk::to_string(elements[p]);
      row["group"] = s.group;
      results.push_back(row);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  output.print({{"results", results},
                {"kernels", specs.size()},
                {"seconds", seconds},
                {"database", gk::tuning::Database::default_path()}},
               text + "tuned " + std::to_string(results.size()) + " problems in " + fixed(seconds, 0) + " s into " +
                   gk::tuning::Database::default_path() + "\n");
  return 0;
}

int cmd_cache(const std::string& what, const std::string& file, const std::string& pack, const std::string& pack_file,
              const Output& output) {
  if (file.empty() && what == "export") {
    throw UsageError(
        "gemmkit cache export needs the archive to write, a tar file: gemmkit cache export FILE.tar [--pack NAME | "
        "--pack-file FILE] (every entry of the cache, or only a pack's kernels), e.g. gemmkit cache export app.tar "
        "--pack-file app.pack.");
  }
  if (file.empty() && what == "import") {
    throw UsageError(
        "gemmkit cache import needs the archive to read, a tar file written by gemmkit cache export: gemmkit cache "
        "import FILE.tar, e.g. gemmkit cache import app.tar.");
  }
  gk::DiskCache cache;
  Json out = {{"root", cache.root()}};
  if (what == "export") {
    std::vector<std::string> keys;  // empty: every entry
    if (!pack.empty() || !pack_file.empty()) {
      const gk::Toolchain& toolchain = gk::Toolchain::discover();
      for (const gk::KernelSpec& spec : pack_of(pack, pack_file, "gemmkit cache export")) {
        for (const std::string& key : cache.keys(toolchain, gk::render(spec))) keys.push_back(key);
      }
    }
    out["file"] = file;
    out["exported"] = cache.export_archive(file, keys);
    output.print(out, "exported " + out["exported"].dump() + " entries of " + cache.root() + " to " + file + "\n");
    return 0;
  }
  if (what == "import") {
    const gk::DiskCache::ImportResult imported = cache.import_archive(file);
    out["file"] = file;
    out["imported"] = imported.imported;
    out["present"] = imported.present;
    output.print(out, "imported " + std::to_string(imported.imported) + " entries into " + cache.root() + " (" +
                          std::to_string(imported.present) + " were there already)\n");
    return 0;
  }
  if (what == "clear") {
    const std::size_t removed = cache.clear();
    const gk::DiskCache::TmpFolders tmp = cache.sweep_tmp();
    out["removed"] = removed;
    out["tmp_remaining"] = tmp.remaining;
    output.print(out, "removed " + std::to_string(removed) + " entries from " + cache.root() +
                          (tmp.remaining > 0 ? "; " + std::to_string(tmp.remaining) +
                                                   " build folders younger than an hour kept in v1/tmp (perhaps "
                                                   "builds in progress)"
                                             : "") +
                          "\n");
    return 0;
  }
  const gk::DiskCache::TmpFolders tmp = cache.sweep_tmp();
  const auto entries = cache.list();
  std::uint64_t total = 0;
  std::string text;
  for (const auto& e : entries) {
    total += e.bytes;
    if (what == "ls") text += e.key.substr(0, 12) + "  " + e.created + "  " + e.kernel_name + "\n";
  }
  out["entries"] = entries.size();
  out["bytes"] = total;
  if (what == "ls") out["list"] = entries;
  out["tmp_removed"] = tmp.removed;
  out["tmp_remaining"] = tmp.remaining;
  text += "cache " + cache.root() + ": " + std::to_string(entries.size()) + " entries, " + std::to_string(total) +
          " bytes\n";
  if (tmp.removed + tmp.remaining > 0) {
    text += "build folders in v1/tmp: " + std::to_string(tmp.removed) + " older than an hour removed (left by killed " +
            "builds), " + std::to_string(tmp.remaining) + " younger kept (perhaps builds in progress)\n";
  }
  output.print(out, text);
  return 0;
}

// CLI11's help with our usage line.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    if (app->get_parent() != nullptr) return CLI::Formatter::make_usage(app, std::move(name));
    return "usage: gemmkit <command> [options] [--json]   (gemmkit <command> --help lists its options)\n";
  }
};

}  // namespace

int main(int argc, char** argv) {
  Output output;
  output.json = std::any_of(argv + 1, argv + argc, [](const char* word) { return std::string(word) == "--json"; });
  CLI::App app("gemmkit: declare, compile and run CUTLASS GEMM kernels.", "gemmkit");
  app.formatter(std::make_shared<HelpFormatter>());
  app.set_version_flag("--version", "gemmkit " GEMMKIT_VERSION);
  app.allow_extras();
  app.require_subcommand(0, 1);
  bool json = false;  // registered so that CLI11 accepts and documents --json; read from argv above, for errors too
  auto add_flag = [&](CLI::App& command, const char* name, bool& value, const char* help) {
    command.add_flag(name, value, help)->disable_flag_override();
  };
  add_flag(app, "--json", json, "print one JSON object (errors too)");
  gk::set_note_handler([&app](const std::string& message) {
    std::cerr << "gemmkit: note: " << gk::cli::cli_spelling(message, app) << "\n";
  });

  Values values;
  bool print_source = false, check = false, grouped = false;
  auto add_command = [&](CLI::App& parent, const char* name, const char* help) {
    CLI::App* command = parent.add_subcommand(name, help);
    command->allow_extras();
    add_flag(*command, "--json", json, "print one JSON object (errors too)");
    return command;
  };
  std::vector<CLI::App*> planning;
  for (const auto& [name, help] : {std::pair{"plan", "show the kernel a plan picks"},
                                   {"tiles", "list every valid configuration of a plan"},
                                   {"compile", "generate and compile the plan's kernel (through the on-disk cache)"},
                                   {"run", "run the plan on the GPU on small-integer data"}}) {
    planning.push_back(add_command(app, name, help));
    values.add_to(*planning.back(), plan_table());
    add_flag(*planning.back(), "--grouped", grouped, "a GroupedGemm: many GEMMs of different extents in one launch");
    values.add_to(*planning.back(), conv_table());
    if (std::string(name) != "run") values.add_to(*planning.back(), sized_plan_table());
  }
  CLI::App& plan = *planning[0];
  CLI::App& run = *planning[3];
  add_flag(plan, "--print-source", print_source, "also print the generated .cu");
  values.add_to(run, run_table());
  add_flag(run, "--check", check, "compare D with a float64 reference");
  CLI::App* tune = add_command(app, "tune",
                               "time the plan's best configurations on the GPU for a shape (or the shape suite) and "
                               "store the fastest in the tuning database, which run() then uses");
  values.add_to(*tune, plan_table());
  values.add_to(*tune, problem_table());
  values.add_to(*tune, tune_table());
  bool suite = false;
  add_flag(*tune, "--suite", suite, "tune the benchmark's shape suite (f16 and bf16 unless --element is given)");
  bool prebuild_candidates = false;
  add_flag(*tune, "--prebuild", prebuild_candidates,
           "with --suite and --cc: only compile the candidates into the cache (no GPU needed), for a GPU machine "
           "that then tunes from the cache");
  CLI::App* prebuild =
      add_command(app, "prebuild", "build a pack of kernels into the cache, in parallel (no GPU needed)");
  std::string pack, pack_file;
  bool quiet = false;
  prebuild->add_option("--pack", pack, "a named pack: defaults (sm80 and sm90 x f16/bf16/f32/tf32 x layouts)")
      ->type_name("NAME");
  prebuild
      ->add_option("--pack-file", pack_file,
                   "a file with one kernel per line, as plan options: --cc 90 --element bf16 --layout-b col "
                   "[--tile N] [--run-time-kernels]; # comments")
      ->type_name("FILE");
  add_flag(*prebuild, "--quiet", quiet, "no progress on stderr");
  CLI::App* cache = add_command(app, "cache", "the on-disk kernel cache: ls, info, clear, export FILE, import FILE");
  std::string cache_what, cache_file;
  for (const char* what : {"ls", "info", "clear", "export", "import"}) {
    const std::string help = std::string("cache ") + what +
                             (what == std::string("export")   ? ": every entry into one tar archive"
                              : what == std::string("import") ? ": the entries of an archive, each checked"
                                                              : "");
    CLI::App* sub = add_command(*cache, what, help.c_str());
    sub->callback([&cache_what, what] { cache_what = what; });
    if (what == std::string("export") || what == std::string("import")) {
      // Not required() for CLI11: its "file is required" does not say which file; cmd_cache does.
      sub->add_option("file", cache_file, "the archive: one plain tar file of cache entries, e.g. app.tar")
          ->type_name("FILE.tar");
    }
    if (what == std::string("export")) {
      sub->add_option("--pack", pack, "only this named pack's kernels")->type_name("NAME");
      sub->add_option("--pack-file", pack_file, "only the kernels of this pack file")->type_name("FILE");
    }
  }
  CLI::App* demo = add_command(app, "demo", "the basic GEMM walk-through (plan, compile, run, check)");
  CLI::App* help = add_command(app, "help",
                               "this list; gemmkit help <command>: its options; gemmkit help env: the environment "
                               "variables gemmkit reads");
  std::string help_topic;
  help->add_option("topic", help_topic, "a command, or env")
      ->type_name("COMMAND|env")
      ->check(CLI::Validator(
          [&app](std::string& name) -> std::string {
            const auto commands = std::as_const(app).get_subcommands({});
            if (name == "env" ||
                std::any_of(commands.begin(), commands.end(), [&](const CLI::App* c) { return c->check_name(name); })) {
              return "";
            }
            return "no command '" + name + "'; gemmkit help lists them (gemmkit help env: the environment variables).";
          },
          ""));
  // Set last, so that no command inherits it: the table is shown once, by gemmkit help env.
  app.footer("gemmkit help env lists the environment variables.");

  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      std::cout << app.help();  // the chosen command's
      return 0;
    } catch (const CLI::CallForVersion& e) {
      std::cout << e.what() << "\n";
      return 0;
    } catch (const CLI::ParseError& e) {
      throw UsageError(gk::cli::usage_message(e));
    }
    const auto chosen = app.get_subcommands();
    CLI::App* command = chosen.empty() ? &app : chosen.front();
    while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
    gk::cli::refuse_leftovers(app, *command);
    if (values.given("activation-parameter") && !values.given("activation")) {
      throw UsageError("--activation-parameter needs --activation (leaky_relu takes it).");
    }
    if (chosen.empty()) {
      if (output.json) throw UsageError("No command; run gemmkit --help for the list.");
      std::cerr << app.help();
      return 2;
    }
    if (help->parsed()) {
      if (help_topic.empty()) {
        std::cout << app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
      } else if (help_topic == "env") {
        std::cout << "environment variables gemmkit reads:\n" << gk::knobs::help_text();
      } else {
        std::cout << app.get_subcommand(help_topic)->help("gemmkit");
      }
      return 0;
    }
    if (values.given("groups") && !grouped) throw UsageError("--groups needs --grouped.");
    if (!values.given("conv")) {
      std::vector<std::string> conv_only = kConvSizes;
      conv_only.insert(conv_only.end(), {"iterator-algorithm", "split-k-mode"});
      for (const std::string& name : conv_only) {
        if (values.given(name)) throw UsageError("--" + name + " needs --conv KIND.");
      }
      const bool sized = values.given("m") || values.given("n") || values.given("k") || values.given("batch");
      if (sized && planning[1]->parsed()) {
        throw UsageError("--m --n --k pick the kernel of one problem (gemmkit plan, compile); tiles lists them all.");
      }
      const bool sized_planning = planning[0]->parsed() || planning[2]->parsed();
      if (sized && sized_planning && !(values.given("m") && values.given("n") && values.given("k"))) {
        throw UsageError("--m, --n and --k go together: the GEMM whose kernel plan and compile show and build.");
      }
      if (sized && sized_planning && grouped) {
        throw UsageError("--m --n --k name one GEMM; a grouped plan's problems are given at run time.");
      }
    } else {
      for (const char* letter : {"n", "k"}) {
        if (values.given(letter)) {
          throw UsageError(std::string("--") + letter + " is --" + gk::cli::conv_spelling(letter) + " for conv.");
        }
      }
      if (values.given("m")) {
        throw UsageError(
            "--m is a GEMM's; a conv's problem is --batch --height --width --channels --out-channels --filter-height "
            "--filter-width (--stride --pad --dilation).");
      }
    }
    if (plan.parsed()) return cmd_plan(values, grouped, print_source, output);
    if (planning[1]->parsed()) return cmd_tiles(values, grouped, output);
    if (planning[2]->parsed()) return cmd_compile(values, grouped, output);
    if (run.parsed()) return grouped ? cmd_run_grouped(values, check, output) : cmd_run(values, check, output);
    if (values.given("suite-groups") && !suite) throw UsageError("--suite-groups needs --suite.");
    if (tune->parsed()) return cmd_tune(values, suite, prebuild_candidates, output);
    if (cache->parsed()) {
      if (cache_what.empty()) throw UsageError("gemmkit cache needs one of: ls, info, clear, export, import.");
      return cmd_cache(cache_what, cache_file, pack, pack_file, output);
    }
    if (prebuild->parsed()) return cmd_prebuild(pack, pack_file, quiet, output);
    if (demo->parsed()) return basic_gemm_walkthrough(output.json);
    return 2;
  } catch (const std::exception& e) {
    return gk::cli::report(e, output, app);
  }
}
