// src/api/packs.cpp: named kernel packs and pack files, both resolved through Gemm plans (so a pack holds exactly the
// kernels those plans would build and run() would choose).
#include "gemmkit/packs.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "catalog/catalog.hpp"
#include "catalog/suite_shapes.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "jit/kernel_loader.hpp"
#include "util/notes.hpp"

namespace gemmkit {
namespace {

template <class Enum>
Enum parse_or_throw(const std::string& option, const std::string& text, const std::string& where) {
  if (auto value = parse_enum<Enum>(text)) return *value;
  throw ConfigError(where + ": --" + option + " '" + text + "' is not " + std::string(EnumTable<Enum>::what) +
                    " (one of: " + enum_names<Enum>() + ").");
}

int parse_int(const std::string& option, const std::string& text, const std::string& where) {
  std::size_t used = 0;
  int value = -1;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 0) {
    throw ConfigError(where + ": --" + option + " '" + text + "' is not a whole number.");
  }
  return value;
}

// "--name value", "--name=value" or "name=value" words into name -> value ("" for a flag).
std::map<std::string, std::string> options_of(const std::string& line, const std::string& where) {
  std::istringstream words(line);
  std::vector<std::string> list;
  for (std::string word; words >> word;) list.push_back(word);
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string word = list[i];
    const bool dashed = word.rfind("--", 0) == 0;
    if (dashed) word = word.substr(2);
    const std::size_t eq = word.find('=');
    std::string name = word.substr(0, eq), value;
    if (eq != std::string::npos) {
      value = word.substr(eq + 1);
    } else if (name == "run-time-kernels" || name == "grouped") {
      value = "";
    } else if (dashed && i + 1 < list.size()) {
      value = list[++i];
    } else {
      throw ConfigError(where + ": '" + list[i] + "' is not an option with a value (--name value or name=value).");
    }
    if (!out.emplace(name, value).second) throw ConfigError(where + ": --" + name + " is given twice.");
  }
  return out;
}

// --tile N: the plan's N-th configuration, as `listing` numbers them.
void set_listed_tile(Plan& plan, const std::string& text, const char* listing, const std::string& where) {
  const auto tiles = plan.tile_descriptions();
  const int index = parse_int("tile", text, where);
  if (index >= static_cast<int>(tiles.size())) {
    throw ConfigError("--tile " + text + " is out of range: the plan has " + std::to_string(tiles.size()) +
                      " configurations (see " + listing + ").");
  }
  plan.set_tile_description(tiles[static_cast<std::size_t>(index)]);
}

// A --grouped line's kernels: a GroupedGemm plan with the options grouped plans take, its own kernel, or with
// run_time, every kernel its runs pick (the MoE form's wide tile too); line_specs adds the line to its errors.
template <class Take>
std::vector<KernelSpec> grouped_line_specs(const GemmOptions& o, bool run_time, Take& take,
                                           const std::map<std::string, std::string>& options,
                                           const std::string& where) {
  GroupedGemm plan(o);
  if (auto text = take("activation")) plan.set_activation(parse_or_throw<Activation>("activation", *text, where));
  if (auto text = take("block-scaling")) {
    plan.set_block_scaling(parse_or_throw<BlockScaling>("block-scaling", *text, where));
  }
  if (auto text = take("tile")) set_listed_tile(plan, *text, "gemmkit tiles --grouped", where);
  if (!options.empty()) {
    throw ConfigError("--" + options.begin()->first +
                      " does not apply to a --grouped line, which takes the element and layout options, --cc, "
                      "--kernel-cc, --activation, --block-scaling, --tile and --run-time-kernels.");
  }
  return run_time ? plan.run_time_kernels() : std::vector<KernelSpec>{plan.spec()};
}

std::vector<KernelSpec> line_specs(const std::string& line, const std::string& where) {
  auto options = options_of(line, where);
  auto take = [&](const char* name) -> std::optional<std::string> {
    auto it = options.find(name);
    if (it == options.end()) return std::nullopt;
    std::string value = it->second;
    options.erase(it);
    return value;
  };
  GemmOptions o;
  auto element = [&](const char* name, std::optional<DataType>& field) {
    if (auto text = take(name)) field = parse_or_throw<DataType>(name, *text, where);
  };
  auto layout = [&](const char* name, std::optional<Layout>& field) {
    if (auto text = take(name)) field = parse_or_throw<Layout>(name, *text, where);
  };
  element("element", o.element);
  if (!o.element) o.element = DataType::f16;
  element("element-a", o.element_a);
  element("element-b", o.element_b);
  element("element-c", o.element_c);
  element("element-d", o.element_d);
  element("element-accumulator", o.element_accumulator);
  layout("layout", o.layout);
  if (!o.layout) o.layout = Layout::RowMajor;
  layout("layout-a", o.layout_a);
  layout("layout-b", o.layout_b);
  layout("layout-c", o.layout_c);
  if (auto cc = take("cc")) o.cc = parse_int("cc", *cc, where);
  if (!o.cc)
    throw ConfigError(where + ": give --cc (e.g. 90): a pack is built for a GPU generation, not this machine's.");
  if (auto kernel_cc = take("kernel-cc")) o.kernel_cc = parse_int("kernel-cc", *kernel_cc, where);
  const bool run_time = take("run-time-kernels").has_value();
  // A problem's extents: the kernel run() picks for it (Gemm::spec_for_problem).
  constexpr const char* kExtents[] = {"m", "n", "k", "batch"};
  std::optional<std::int64_t> extents[std::size(kExtents)];
  for (std::size_t i = 0; i < std::size(kExtents); ++i) {
    if (auto text = take(kExtents[i])) extents[i] = parse_int(kExtents[i], *text, where);
    if (extents[i] == 0) throw ConfigError(where + ": --" + kExtents[i] + " must be at least 1.");
  }
  const bool sized = extents[0] || extents[1] || extents[2] || extents[3];
  if (sized && !(extents[0] && extents[1] && extents[2])) {
    throw ConfigError(where + ": --m, --n and --k go together (the problem whose kernel run() picks).");
  }
  if (sized && run_time) throw ConfigError(where + ": give --run-time-kernels or a problem (--m --n --k), not both.");
  const bool grouped = take("grouped").has_value();
  if (grouped && sized) {
    throw ConfigError(where + ": a --grouped line names a plan, not a problem; drop --m/--n/--k.");
  }
  try {
    const jit::NoBuildAhead internal;  // the pack builds what it lists, not each plan's default
    if (grouped) return grouped_line_specs(o, run_time, take, options, where);
    Gemm plan(o);
    if (auto text = take("opclass")) plan.set_opclass(parse_or_throw<OpClass>("opclass", *text, where));
    if (auto text = take("swizzle")) plan.set_swizzling_functor(parse_or_throw<Swizzle>("swizzle", *text, where));
    if (auto text = take("activation")) plan.set_activation(parse_or_throw<Activation>("activation", *text, where));
    if (auto text = take("bias")) plan.set_bias(parse_or_throw<BiasMode>("bias", *text, where));
    if (auto text = take("activation-at-launch")) {
      const int at_launch = parse_int("activation-at-launch", *text, where);
      if (at_launch > 1) throw ConfigError(where + ": --activation-at-launch takes 0 or 1, not " + *text + ".");
      plan.set_activation_at_launch(at_launch == 1);
    }
    if (auto text = take("scale")) plan.set_scale(parse_or_throw<ScaleMode>("scale", *text, where));
    if (auto text = take("block-scaling")) {
      plan.set_block_scaling(parse_or_throw<BlockScaling>("block-scaling", *text, where));
    }
    if (auto text = take("tile")) set_listed_tile(plan, *text, "gemmkit tiles", where);
    if (!options.empty()) {
      throw ConfigError("unknown option --" + options.begin()->first +
                        "; a pack line takes the plan options of gemmkit compile, --scale, --block-scaling, "
                        "--run-time-kernels and --m --n --k [--batch].");
    }
    if (sized) return {plan.spec_for_problem(*extents[0], *extents[1], *extents[2], extents[3].value_or(1))};
    return run_time ? plan.run_time_kernels() : std::vector<KernelSpec>{plan.spec()};
  } catch (const ConfigError& e) {
    if (std::string(e.what()).rfind(where, 0) == 0) throw;
    throw ConfigError(where + ": " + e.what(), e.nearest);
  }
}

// A plan of `element` operands accumulating in `accumulator`, A, C and D row-major, B as given.
GemmOptions row_major_options(DataType element, DataType accumulator, Layout b, int cc) {
  GemmOptions o;
  o.element = element;
  o.element_accumulator = accumulator;
  o.layout = Layout::RowMajor;
  o.layout_b = b;
  o.cc = cc;
  return o;
}

// The plan's default kernel's quick twin (as the plan lists it), where it has one.
std::optional<KernelSpec> quick_twin(const Gemm& plan) {
  KernelSpec spec = plan.spec();
  const std::vector<TileDescription> tiles = plan.tile_descriptions();
  const std::optional<std::size_t> twin = catalog::quick_twin_index(tiles, spec);
  if (!twin) return std::nullopt;
  spec.tile = tiles[*twin];
  return spec;
}

}  // namespace

std::vector<std::string> pack_names() {
  return {"defaults"};
}

std::vector<KernelSpec> pack_specs(const std::string& name) {
  if (name != "defaults") {
    throw ConfigError("unknown kernel pack '" + name + "'; the named packs are: defaults (or give a pack file).");
  }
  const jit::NoBuildAhead internal;  // the pack builds what it lists, not each plan's default
  const QuietNotes quiet;            // the odd extents' 2.x kernels are listed on purpose
  std::vector<KernelSpec> specs;
  std::set<std::string> seen;
  auto add = [&](KernelSpec spec) {
    // Two plans may share a kernel (e.g. SM90 tf32 computes row x row as D^T = B^T A^T).
    if (seen.insert(spec.canonical()).second) specs.push_back(std::move(spec));
  };
  for (const int cc : {80, 90}) {
    // f32 operands: exact f32 math on SIMT cores, and tf32 on tensor cores (the plan's default for f32).
    for (const auto& [element, opclass] : {std::pair{DataType::f16, OpClass::TensorOp},
                                           {DataType::bf16, OpClass::TensorOp},
                                           {DataType::f32, OpClass::Simt},
                                           {DataType::f32, OpClass::TensorOp}}) {
      for (const Layout a : {Layout::RowMajor, Layout::ColumnMajor}) {
        for (const Layout b : {Layout::RowMajor, Layout::ColumnMajor}) {
          GemmOptions o;
          o.element = element;
          o.layout = Layout::RowMajor;
          o.layout_a = a;
          o.layout_b = b;
          o.cc = cc;
          std::optional<Gemm> plan;
          try {
            plan.emplace(o);
          } catch (const ConfigError& e) {
            // The nearest combination with a kernel, as the error names it (e.g. element_accumulator=f32).
            bool applied = false;
            for (const ConfigError::Setting& s : e.nearest) {
              if (s.option == "element_accumulator") o.element_accumulator = parse_enum<DataType>(s.value);
              applied = applied || s.option == "element_accumulator";
            }
            if (!applied) continue;  // no kernel for these types and layouts on this GPU
            try {
              plan.emplace(o);
            } catch (const ConfigError&) {
              continue;
            }
          }
          const auto opclasses = plan->opclasses();
          if (std::find(opclasses.begin(), opclasses.end(), opclass) == opclasses.end()) continue;
          plan->set_opclass(opclass);
          std::vector<KernelSpec> kernels = plan->run_time_kernels();
          // The default's quick twin: a first run with any activation, bias or scales runs on it at once.
          if (std::optional<KernelSpec> twin = quick_twin(*plan)) kernels.push_back(std::move(*twin));
          for (KernelSpec& spec : kernels) add(std::move(spec));
        }
      }
    }
  }
  // The kernels run() picks for gemmkit's representative problems (square, long K, LLM projections from decode to
  // prefill, odd extents) on SM90 row-major 16-bit plans that accumulate in f32, as torch.matmul does: the shape
  // suite runs on these with nothing to compile.
  for (const DataType element : {DataType::f16, DataType::bf16}) {
    Gemm plan(row_major_options(element, DataType::f32, Layout::RowMajor, 90));
    add(plan.spec());
    if (std::optional<KernelSpec> twin = quick_twin(plan)) add(std::move(*twin));
    for (const catalog::SuiteProblem& p : catalog::suite_problems()) add(plan.spec_for_problem(p.m, p.n, p.k));
  }
  // FP8 as gemmkit.torch.scaled_mm declares it (e4m3 to bf16 without C; scale vectors, as which per-tensor scales
  // run too, and DeepSeek-V3's block scales): its default and the kernels run() picks for the suite's problems whose
  // rows FP8 and bf16 can read (K a multiple of 16 bytes of e4m3, N of 16 bytes of bf16).
  for (const BlockScaling blocks : {BlockScaling::None, BlockScaling::Blockwise}) {
    GemmOptions o;
    o.element_a = o.element_b = DataType::e4m3;
    o.element_c = DataType::void_t;
    o.element_d = DataType::bf16;
    o.element_accumulator = DataType::f32;
    o.layout_a = o.layout_c = Layout::RowMajor;
    o.layout_b = Layout::ColumnMajor;
    o.cc = 90;
    Gemm plan(o);
    if (blocks == BlockScaling::None) {
      plan.set_scale(ScaleMode::RowAndColumn);
    } else {
      plan.set_block_scaling(blocks);
    }
    add(plan.spec());
    for (const catalog::SuiteProblem& p : catalog::suite_problems()) {
      if (p.k % 16 == 0 && p.n % 8 == 0) add(plan.spec_for_problem(p.m, p.n, p.k));
    }
  }
  // The walk-throughs and the reference's notebooks, so that they compile nothing: every activation of the row-major
  // f16 plan (f16 accumulation as the notebooks declare it, f32 as the C++ epilogue walk-through does), and the
  // grouped plans of the grouped walk-through and of the MoE form (B row-major, or column-major: transposed expert
  // weights), on both generations; on SM90 also the CUTLASS 2.x grouped kernel the walk-through runs beside the 3.x
  // one.
  for (const int cc : {80, 90}) {
    for (const DataType accumulator : {DataType::f16, DataType::f32}) {
      Gemm plan(row_major_options(DataType::f16, accumulator, Layout::RowMajor, cc));
      for (const Activation activation : Gemm::activations()) {
        plan.set_activation(activation);
        add(plan.spec());
      }
    }
    for (const DataType element : {DataType::f16, DataType::bf16}) {
      for (const Layout b : {Layout::RowMajor, Layout::ColumnMajor}) {
        // With the MoE form's wide tile, for an N that is a multiple of 256.
        for (KernelSpec& spec : GroupedGemm(row_major_options(element, DataType::f32, b, cc)).run_time_kernels()) {
          add(std::move(spec));
        }
      }
    }
  }
  // The C++ basic walk-through compiles its plan's second configuration on purpose, and the reference's 00_basic_gemm
  // notebook runs f32 with 3xTF32 (multiply_add_fast_f32, CUTLASS 2.x kernels on either generation). The notebook also
  // compiles a configuration it draws at random from the listing, with its Stream-K twin: that cell shows a compile.
  for (const int cc : {80, 90}) {
    Gemm basic(row_major_options(DataType::f16, DataType::f32, Layout::RowMajor, cc));
    basic.set_tile_description(basic.tile_descriptions().at(1));
    add(basic.spec());
    Gemm precise(row_major_options(DataType::f32, DataType::f32, Layout::RowMajor, cc));
    precise.set_math_operation(MathOperation::MultiplyAddFastF32);
    add(precise.spec());
  }
  GemmOptions sm80_grouped = row_major_options(DataType::f16, DataType::f32, Layout::RowMajor, 90);
  sm80_grouped.kernel_cc = 80;
  add(GroupedGemm(sm80_grouped).spec());
  return specs;
}

std::vector<KernelSpec> parse_pack(const std::string& text, const std::string& what) {
  std::vector<KernelSpec> specs;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    for (KernelSpec& spec : line_specs(line, what + " line " + std::to_string(number))) specs.push_back(spec);
  }
  if (specs.empty()) throw ConfigError(what + " names no kernel: give one plan per line, e.g. --cc 90 --element f16");
  return specs;
}

std::vector<KernelSpec> read_pack_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read the pack file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_pack(text.str(), path);
}

}  // namespace gemmkit
