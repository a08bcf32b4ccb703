// tools/gemmkit/main.cpp: the gemmkit command line: plan, tiles, compile, run, cache, demo (--json everywhere).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/runtime.hpp"
#include "util/host_matrix.hpp"
#include "util/json.hpp"
#include "util/knobs.hpp"

// examples/basic_gemm.cpp, compiled into the CLI as `gemmkit demo`.
int basic_gemm_walkthrough(bool json);

namespace gk = gemmkit;
using gk::json::Value;

namespace {

constexpr const char* kUsage = R"(usage: gemmkit <command> [options] [--json]

commands:
  plan      show the kernel a plan picks (--print-source shows the generated .cu)
  tiles     list every valid configuration of a plan
  compile   generate and compile the plan's kernel (through the on-disk cache)
  run       run the plan on the GPU: --m --n --k [--batch B] [--alpha A] [--beta B] [--check] [--repeat N]
  cache     ls | info | clear
  demo      the basic GEMM walk-through (plan, kernel name, compile, run, check)

plan options (all commands that build a plan):
  --cc N                   target compute capability (default: the current GPU's)
  --element T              f16 | bf16 | f32 | f64 | s8 | s32 (generic element type)
  --element-a/-b/-c/-d T   per-operand element types
  --element-accumulator T  accumulator type (default: element C's)
  --layout L               row | col (generic layout); --layout-a/-b/-c per operand
  --opclass X              tensorop | simt
  --swizzle S              IdentitySwizzle1|2|4|8 | HorizontalSwizzle | ThreadblockSwizzleStreamK
  --activation A           identity | relu | leaky_relu | gelu | gelu_tanh | hardswish | sigmoid | silu | tanh
  --tile N                 use the N-th entry of `gemmkit tiles` instead of the default

environment:
)";

struct Args {
  std::string command, subcommand;
  std::map<std::string, std::string> options;
  std::set<std::string> flags;

  bool flag(const std::string& name) const { return flags.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const {
    auto it = options.find(name);
    if (it == options.end()) return std::nullopt;
    return it->second;
  }
  // An integer from `low` to `high` (an int by default).
  long number(const std::string& name, long fallback, long low = INT_MIN, long high = INT_MAX) const {
    auto v = get(name);
    if (!v) return fallback;
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(v->c_str(), &end, 10);
    if (end == v->c_str() || *end != '\0' || errno == ERANGE || value < low || value > high) {
      const std::string range = low == INT_MIN ? "" : " from " + std::to_string(low) + " to " + std::to_string(high);
      throw gk::ConfigError("--" + name + " expects an integer" + range + "; got '" + *v + "'.");
    }
    return value;
  }
  // A problem extent or count: 1 to 2^31-1.
  long positive(const std::string& name, long fallback) const { return number(name, fallback, 1, INT_MAX); }
  double real(const std::string& name, double fallback) const {
    auto v = get(name);
    if (!v) return fallback;
    char* end = nullptr;
    const double value = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !std::isfinite(value)) {
      throw gk::ConfigError("--" + name + " expects a finite number; got '" + *v + "'.");
    }
    return value;
  }
};

const std::set<std::string> kFlags = {"json", "check", "print-source", "help"};
const std::set<std::string> kOptions = {
    "cc",     "element", "element-a", "element-b", "element-c", "element-d", "element-accumulator", "layout",
    "layout-a", "layout-b", "layout-c", "opclass", "swizzle", "activation", "activation-parameter", "tile",
    "m",      "n",       "k",         "batch",     "alpha",     "beta",      "repeat"};

Args parse_args(int argc, char** argv) {
  Args args;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.rfind("--", 0) != 0) {
      positional.push_back(word);
      continue;
    }
    std::string name = word.substr(2);
    const std::string key = name.substr(0, name.find('='));
    if (!kOptions.count(key) && !(kFlags.count(key) && key == name)) {
      throw gk::ConfigError(kFlags.count(key) ? "Option --" + key + " takes no value."
                                              : "Unknown option --" + key + "; run gemmkit help for the options.");
    }
    if (auto eq = name.find('='); eq != std::string::npos) {
      args.options[key] = name.substr(eq + 1);
    } else if (kFlags.count(name)) {
      args.flags.insert(name);
    } else if (i + 1 < argc) {
      args.options[name] = argv[++i];
    } else {
      throw gk::ConfigError("Option --" + name + " needs a value.");
    }
  }
  if (!positional.empty()) args.command = positional[0];
  if (positional.size() > 1) args.subcommand = positional[1];
  return args;
}

gk::DataType data_type_option(const std::string& text, const std::string& option) {
  if (auto t = gk::parse_data_type(text)) return *t;
  throw gk::ConfigError("--" + option + ": unknown element type '" + text + "'; use f16, bf16, f32, f64, s8 or s32.");
}

gk::Layout layout_option(const std::string& text, const std::string& option) {
  if (auto l = gk::parse_layout(text)) return *l;
  throw gk::ConfigError("--" + option + ": unknown layout '" + text + "'; use row or col.");
}

template <class Enum, std::size_t N>
Enum enum_option(const std::string& text, const std::string& option, const Enum (&values)[N]) {
  std::string names;
  for (Enum v : values) {
    if (text == gk::to_string(v)) return v;
    names += (names.empty() ? "" : ", ") + std::string(gk::to_string(v));
  }
  throw gk::ConfigError("--" + option + ": unknown value '" + text + "'; use one of " + names + ".");
}

gk::Gemm make_plan(const Args& args) {
  gk::GemmOptions o;
  auto type = [&](const char* name, std::optional<gk::DataType>& slot) {
    if (auto v = args.get(name)) slot = data_type_option(*v, name);
  };
  auto layout = [&](const char* name, std::optional<gk::Layout>& slot) {
    if (auto v = args.get(name)) slot = layout_option(*v, name);
  };
  type("element", o.element);
  type("element-a", o.element_a);
  type("element-b", o.element_b);
  type("element-c", o.element_c);
  type("element-d", o.element_d);
  type("element-accumulator", o.element_accumulator);
  layout("layout", o.layout);
  layout("layout-a", o.layout_a);
  layout("layout-b", o.layout_b);
  layout("layout-c", o.layout_c);
  if (!o.element && !o.element_a) o.element = gk::DataType::f16;
  if (!o.layout && !o.layout_a) o.layout = gk::Layout::RowMajor;
  if (!o.element_accumulator && !o.element_c && o.element == gk::DataType::f16) o.element_accumulator = gk::DataType::f32;
  if (auto cc = args.get("cc")) o.cc = static_cast<int>(args.number("cc", 0));
  gk::Gemm plan(o);
  if (auto v = args.get("opclass")) {
    auto oc = gk::parse_opclass(*v);
    if (!oc) throw gk::ConfigError("--opclass: unknown value '" + *v + "'; use tensorop or simt.");
    plan.set_opclass(*oc);
  }
  if (auto v = args.get("swizzle")) {
    const gk::Swizzle all[] = {gk::Swizzle::Identity1, gk::Swizzle::Identity2, gk::Swizzle::Identity4,
                               gk::Swizzle::Identity8, gk::Swizzle::Horizontal, gk::Swizzle::StreamK};
    plan.set_swizzling_functor(enum_option(*v, "swizzle", all));
  }
  if (auto v = args.get("activation")) {
    const gk::Activation all[] = {gk::Activation::Identity, gk::Activation::ReLU,     gk::Activation::LeakyReLU,
                                  gk::Activation::GELU,     gk::Activation::GELUTanh, gk::Activation::HardSwish,
                                  gk::Activation::Sigmoid,  gk::Activation::SiLU,     gk::Activation::Tanh};
    plan.set_activation(enum_option(*v, "activation", all), args.real("activation-parameter", 0.01));
  }
  if (auto v = args.get("tile")) {
    const auto tiles = plan.tile_descriptions();
    const long index = args.number("tile", 0);
    if (index < 0 || index >= static_cast<long>(tiles.size())) {
      throw gk::ConfigError("--tile " + *v + " is out of range: the plan has " + std::to_string(tiles.size()) +
                            " configurations (see gemmkit tiles).");
    }
    plan.set_tile_description(tiles[static_cast<std::size_t>(index)]);
  }
  return plan;
}

Value shape_json(const gk::Shape3& s) {
  Value v = Value::array();
  for (int x : s) v.push_back(x);
  return v;
}

Value tile_json(const gk::TileDescription& td) {
  Value v = Value::object();
  v.set("threadblock_shape", shape_json(td.threadblock_shape));
  v.set("warp_count", shape_json(td.warp_count));
  v.set("stages", td.stages);
  v.set("instruction_shape", shape_json(td.instruction_shape));
  v.set("cluster_shape", shape_json(td.cluster_shape));
  v.set("kernel_schedule", std::string(gk::to_string(td.kernel_schedule)));
  v.set("epilogue_schedule", std::string(gk::to_string(td.epilogue_schedule)));
  v.set("tile_scheduler", std::string(gk::to_string(td.tile_scheduler)));
  v.set("math_operation", std::string(gk::to_string(td.math_operation)));
  return v;
}

Value spec_json(const gk::KernelSpec& s) {
  Value v = Value::object();
  v.set("kernel_name", s.name());
  v.set("cc", s.cc);
  v.set("kernel_cc", s.kernel_cc);
  v.set("family", std::string(gk::to_string(s.family)));
  v.set("opclass", std::string(gk::to_string(s.opclass)));
  v.set("element_a", std::string(gk::to_string(s.element_a)));
  v.set("element_b", std::string(gk::to_string(s.element_b)));
  v.set("element_c", std::string(gk::to_string(s.element_c)));
  v.set("element_d", std::string(gk::to_string(s.element_d)));
  v.set("element_accumulator", std::string(gk::to_string(s.element_accumulator)));
  v.set("layout_a", std::string(gk::to_string(s.layout_a)));
  v.set("layout_b", std::string(gk::to_string(s.layout_b)));
  v.set("layout_c", std::string(gk::to_string(s.layout_c)));
  Value align = Value::array();
  align.push_back(s.alignment_a);
  align.push_back(s.alignment_b);
  align.push_back(s.alignment_c);
  v.set("alignment", align);
  v.set("swizzle", std::string(gk::to_string(s.swizzle)));
  v.set("activation", std::string(gk::to_string(s.activation)));
  v.set("arch", s.arch_flag());
  v.set("tile", tile_json(s.tile));
  return v;
}

void emit_result(const Args& args, const Value& json, const std::string& text) {
  if (args.flag("json")) {
    std::cout << json.dump() << "\n";
  } else {
    std::cout << text;
  }
}

int cmd_plan(const Args& args) {
  gk::Gemm plan = make_plan(args);
  const gk::KernelSpec spec = plan.spec();
  Value out = spec_json(spec);
  std::string text = "kernel: " + spec.name() + "\n" + "cc " + std::to_string(spec.cc) + ", " +
                     std::string(gk::to_string(spec.opclass)) + ", " + std::string(gk::to_string(spec.family)) +
                     "\ntile:\n" + spec.tile.to_string() + "\n";
  if (args.flag("print-source")) {
    const std::string source = gk::emit(spec).text;
    out.set("source", source);
    text += "\n" + source;
  }
  emit_result(args, out, text);
  return 0;
}

int cmd_tiles(const Args& args) {
  gk::Gemm plan = make_plan(args);
  const auto tiles = plan.tile_descriptions();
  Value list = Value::array();
  std::string text;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    list.push_back(tile_json(tiles[i]));
    text += "[" + std::to_string(i) + "] " + tiles[i].to_string() + "\n";
  }
  Value out = Value::object();
  out.set("count", static_cast<int>(tiles.size()));
  out.set("tile_descriptions", list);
  emit_result(args, out, text);
  return 0;
}

int cmd_compile(const Args& args) {
  gk::Gemm plan = make_plan(args);
  const auto built = plan.compile();
  Value out = Value::object();
  out.set("kernel_name", built.kernel_name);
  out.set("cache", built.cache_hit ? "hit" : "miss");
  out.set("seconds", built.build_seconds);
  out.set("module_path", built.module_path);
  out.set("cache_key", built.cache_key);
  emit_result(args, out,
              "kernel: " + built.kernel_name + "\ncache:  " + (built.cache_hit ? "hit" : "miss (compiled in " +
              std::to_string(built.build_seconds) + " s)") + "\nmodule: " + built.module_path + "\n");
  return 0;
}

// Device copy of a host matrix, freed at scope exit.
struct DeviceCopy {
  void* ptr = nullptr;
  explicit DeviceCopy(const gk::util::HostMatrix& m) {
    if (cudaMalloc(&ptr, m.bytes()) != cudaSuccess) throw gk::CudaError("cudaMalloc failed for a test matrix", 2);
    cudaMemcpy(ptr, m.data(), m.bytes(), cudaMemcpyHostToDevice);
  }
  ~DeviceCopy() { cudaFree(ptr); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
};

int cmd_run(const Args& args) {
  gk::Gemm plan = make_plan(args);
  const long m = args.positive("m", 128), n = args.positive("n", 128), k = args.positive("k", 128);
  const long batch = args.positive("batch", 1);
  const long repeat = args.positive("repeat", 10);
  const double alpha = args.real("alpha", 1.0), beta = args.real("beta", 0.0);
  const int device = gk::current_device();
  using gk::util::HostMatrix;
  HostMatrix A(plan.element_a(), m, k, plan.layout_a(), batch), B(plan.element_b(), k, n, plan.layout_b(), batch);
  HostMatrix C(plan.element_c(), m, n, plan.layout_c(), batch), D(plan.element_d(), m, n, plan.layout_c(), batch);
  A.fill_integers(1, -4, 4);
  B.fill_integers(2, -4, 4);
  C.fill_integers(3, -4, 4);
  DeviceCopy dA(A), dB(B), dC(C), dD(D);
  const auto vA = A.view_at(dA.ptr, device), vB = B.view_at(dB.ptr, device), vC = C.view_at(dC.ptr, device),
             vD = D.view_at(dD.ptr, device);
  const auto t0 = std::chrono::steady_clock::now();
  plan.run(vA, vB, &vC, vD, alpha, beta);  // first run: compile or load
  const double first_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (long i = 0; i < repeat; ++i) plan.run(vA, vB, &vC, vD, alpha, beta, {nullptr, false, false});
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, start, stop);
  const double seconds = ms / 1e3 / static_cast<double>(std::max(repeat, 1L));
  const double tflops = 2.0 * m * n * k * batch / seconds / 1e12;
  cudaMemcpy(D.data(), dD.ptr, D.bytes(), cudaMemcpyDeviceToHost);
  Value out = Value::object();
  out.set("kernel_name", plan.kernel_name());
  out.set("m", static_cast<std::int64_t>(m));
  out.set("n", static_cast<std::int64_t>(n));
  out.set("k", static_cast<std::int64_t>(k));
  out.set("batch", static_cast<std::int64_t>(batch));
  out.set("first_run_seconds", first_seconds);
  out.set("seconds_per_run", seconds);
  out.set("tflops", tflops);
  std::string text = "kernel: " + plan.kernel_name() + "\n" + std::to_string(tflops) + " TFLOP/s\n";
  int status = 0;
  if (args.flag("check")) {
    const std::int64_t samples = static_cast<std::int64_t>(m) * n * batch <= (1 << 18) ? 0 : 4096;
    const auto cmp = gk::util::compare_with_reference(A, B, &C, D, alpha, beta, samples);
    // Small-integer data: every product and sum is exact in the accumulator, so only D's rounding remains.
    const bool ok = cmp.max_rel_error <= (gk::bits_of(plan.element_d()) <= 16 ? 1e-2 : 1e-6);
    out.set("checked", cmp.checked);
    out.set("max_abs_error", cmp.max_abs_error);
    out.set("max_rel_error", cmp.max_rel_error);
    out.set("check", ok ? "pass" : "fail");
    text += "check: " + std::string(ok ? "pass" : "FAIL") + " (max abs error " + std::to_string(cmp.max_abs_error) +
            " over " + std::to_string(cmp.checked) + " elements)\n";
    status = ok ? 0 : 1;
  }
  emit_result(args, out, text);
  return status;
}

int cmd_cache(const Args& args) {
  gk::DiskCache cache;
  Value out = Value::object();
  out.set("root", cache.root());
  if (args.subcommand == "clear") {
    const auto removed = cache.clear();
    out.set("removed", static_cast<std::uint64_t>(removed));
    emit_result(args, out, "removed " + std::to_string(removed) + " entries from " + cache.root() + "\n");
    return 0;
  }
  const auto entries = cache.list();
  std::uint64_t total = 0;
  Value list = Value::array();
  std::string text;
  for (const auto& e : entries) {
    total += e.bytes;
    Value item = Value::object();
    item.set("key", e.key);
    item.set("kernel_name", e.kernel_name);
    item.set("dir", e.dir);
    item.set("created", e.created);
    item.set("bytes", e.bytes);
    list.push_back(item);
    text += e.key.substr(0, 12) + "  " + e.created + "  " + e.kernel_name + "\n";
  }
  out.set("entries", static_cast<std::uint64_t>(entries.size()));
  out.set("bytes", total);
  if (args.subcommand == "ls") out.set("list", list);
  if (args.subcommand != "ls" && args.subcommand != "info") {
    throw gk::ConfigError("gemmkit cache: unknown subcommand '" + args.subcommand + "'; use ls, info or clear.");
  }
  if (args.subcommand == "info") text = "";
  text += "cache " + cache.root() + ": " + std::to_string(entries.size()) + " entries, " + std::to_string(total) +
          " bytes\n";
  emit_result(args, out, text);
  return 0;
}

int cmd_demo(const Args& args) { return basic_gemm_walkthrough(args.flag("json")); }

const char* error_kind(const std::exception& e) {
  if (dynamic_cast<const gk::ConfigError*>(&e)) return "ConfigError";
  if (dynamic_cast<const gk::TensorError*>(&e)) return "TensorError";
  if (dynamic_cast<const gk::ToolchainError*>(&e)) return "ToolchainError";
  if (dynamic_cast<const gk::CompileError*>(&e)) return "CompileError";
  if (dynamic_cast<const gk::CudaError*>(&e)) return "CudaError";
  return "Error";
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  // Looked up before parsing, so that a parse error is reported as JSON too.
  const bool json = std::any_of(argv + 1, argv + argc, [](const char* word) { return std::strcmp(word, "--json") == 0; });
  try {
    args = parse_args(argc, argv);
    if (args.command.empty() || args.command == "help" || args.flag("help")) {
      std::cout << kUsage << gk::knobs::help_text();
      return args.command.empty() && !args.flag("help") ? 2 : 0;
    }
    if (args.command == "plan") return cmd_plan(args);
    if (args.command == "tiles") return cmd_tiles(args);
    if (args.command == "compile") return cmd_compile(args);
    if (args.command == "run") return cmd_run(args);
    if (args.command == "cache") return cmd_cache(args);
    if (args.command == "demo") return cmd_demo(args);
    throw gk::ConfigError("Unknown command '" + args.command + "'; run gemmkit help.");
  } catch (const std::exception& e) {
    if (json) {
      Value out = Value::object();
      out.set("error", error_kind(e));
      out.set("message", e.what());
      if (auto* ce = dynamic_cast<const gk::CompileError*>(&e)) out.set("source_path", ce->source_path);
      std::cout << out.dump() << "\n";
    } else {
      std::cerr << "gemmkit: " << error_kind(e) << ": " << e.what() << "\n";
    }
    return 1;
  }
}
