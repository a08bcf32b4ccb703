// tools/gemmkit/main.cpp: the gemmkit command line (CLI11): plan, tiles, compile, run, cache, demo; --json everywhere.
#include <cuda_runtime_api.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gemmkit/cache.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/runtime.hpp"
#include "testing/device_buffer.hpp"
#include "testing/host_matrix.hpp"
#include "testing/walkthrough.hpp"
#include "util/knobs.hpp"

namespace gk = gemmkit;
using Json = nlohmann::ordered_json;

namespace {

// A command line that names no command, an unknown command or option, or lacks a value.
class UsageError : public gk::Error {
 public:
  using gk::Error::Error;
};

template <class Enum>
std::string one_of() {
  return "one of: " + gk::enum_names<Enum>();
}

// The options of every command that builds a plan, in one table; their values stay text until make_plan().
class PlanOptions {
 public:
  void add_to(CLI::App& command) {
    struct Row {
      std::string name, value, help;
    };
    const std::vector<Row> table = {
        {"cc", "N", "target compute capability, e.g. 80 or 90 (default: the current GPU's)"},
        {"kernel-cc", "N",
         "kernel generation: 80 (CUTLASS 2.x kernels, any SM80+ GPU) or 90 (CUTLASS 3.x, SM90 "
         "only); default: the best for --cc"},
        {"element", "TYPE", "generic element type (default f16), " + one_of<gk::DataType>()},
        {"element-a", "TYPE", "element type of A"},
        {"element-b", "TYPE", "element type of B"},
        {"element-c", "TYPE", "element type of C"},
        {"element-d", "TYPE", "element type of D"},
        {"element-accumulator", "TYPE", "accumulator type (default: element C's; f32 for f16)"},
        {"layout", "LAYOUT", "generic layout (default row), " + one_of<gk::Layout>() + " (or row, col)"},
        {"layout-a", "LAYOUT", "layout of A"},
        {"layout-b", "LAYOUT", "layout of B"},
        {"layout-c", "LAYOUT", "layout of C and D"},
        {"opclass", "CLASS", one_of<gk::OpClass>()},
        {"swizzle", "NAME", one_of<gk::Swizzle>()},
        {"activation", "NAME", one_of<gk::Activation>()},
        {"activation-parameter", "X", "the leaky_relu slope (default 0.01)"},
        {"bias", "MODE", "a bias vector added before the activation, " + one_of<gk::BiasMode>()},
        {"raster-order", "ORDER", "SM90 persistent schedulers, " + one_of<gk::RasterOrder>()},
        {"max-swizzle-size", "N", "SM90 persistent schedulers: 1, 2, 4 or 8"},
        {"tile", "N", "use the N-th entry of `gemmkit tiles` instead of the default"},
    };
    for (const Row& row : table) {
      options_[row.name].push_back(
          command.add_option("--" + row.name, values_[row.name], row.help)->type_name(row.value));
    }
  }

  std::optional<std::string> get(const std::string& name) const {
    const auto& options = options_.at(name);
    if (std::none_of(options.begin(), options.end(), [](const CLI::Option* o) { return o->count() > 0; })) {
      return std::nullopt;
    }
    return values_.at(name);
  }

  int integer(const std::string& name) const { return number<int>(name, "an integer"); }
  double real(const std::string& name) const { return number<double>(name, "a number"); }

  template <class Enum>
  std::optional<Enum> enumerator(const std::string& name) const {
    const std::optional<std::string> text = get(name);
    if (!text) return std::nullopt;
    if (auto value = gk::parse_enum<Enum>(*text)) return value;
    throw gk::ConfigError("--" + name + ": unknown " + std::string(gk::EnumTable<Enum>::what) + " '" + *text +
                          "'; use " + one_of<Enum>() + ".");
  }

 private:
  template <class Number>
  Number number(const std::string& name, const char* what) const {
    const std::string text = *get(name);
    Number value{};
    if (CLI::detail::lexical_cast(text, value)) return value;
    throw UsageError("--" + name + " expects " + what + "; got '" + text + "'.");
  }

  // Every command that builds a plan shares the values (node-based: CLI11 keeps pointers to them).
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<CLI::Option*>> options_;
};

gk::Gemm make_plan(const PlanOptions& args) {
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
  if (!o.element && !o.element_a) o.element = gk::DataType::f16;
  if (!o.layout && !o.layout_a) o.layout = gk::Layout::RowMajor;
  if (!o.element_accumulator && !o.element_c && o.element == gk::DataType::f16) {
    o.element_accumulator = gk::DataType::f32;
  }
  if (args.get("cc")) o.cc = args.integer("cc");
  if (args.get("kernel-cc")) o.kernel_cc = args.integer("kernel-cc");
  gk::Gemm plan(o);
  if (auto opclass = args.enumerator<gk::OpClass>("opclass")) plan.set_opclass(*opclass);
  if (auto swizzle = args.enumerator<gk::Swizzle>("swizzle")) plan.set_swizzling_functor(*swizzle);
  if (auto activation = args.enumerator<gk::Activation>("activation")) {
    const double slope = args.get("activation-parameter") ? args.real("activation-parameter") : 0.01;
    plan.set_activation(*activation, slope);
  }
  if (auto bias = args.enumerator<gk::BiasMode>("bias")) plan.set_bias(*bias);
  if (auto order = args.enumerator<gk::RasterOrder>("raster-order")) plan.set_raster_order(*order);
  if (args.get("max-swizzle-size")) plan.set_max_swizzle_size(args.integer("max-swizzle-size"));
  if (args.get("tile")) {
    const auto tiles = plan.tile_descriptions();
    const int index = args.integer("tile");
    if (index < 0 || index >= static_cast<int>(tiles.size())) {
      throw gk::ConfigError("--tile " + std::to_string(index) + " is out of range: the plan has " +
                            std::to_string(tiles.size()) + " configurations (see gemmkit tiles).");
    }
    plan.set_tile_description(tiles[static_cast<std::size_t>(index)]);
  }
  return plan;
}

struct Output {
  bool json = false;
  void print(const Json& value, const std::string& text) const {
    if (json) {
      std::cout << value.dump(2) << "\n";
    } else {
      std::cout << text;
    }
  }
};

int cmd_plan(const PlanOptions& args, bool print_source, const Output& output) {
  gk::Gemm plan = make_plan(args);
  const gk::KernelSpec spec = plan.spec();
  Json out = spec;
  std::string text = "kernel: " + spec.name() + "\ncc " + std::to_string(spec.cc) + ", " +
                     std::string(gk::to_string(spec.opclass)) + ", " + std::string(gk::to_string(spec.family)) +
                     "\ntile:\n" + spec.tile.to_string() + "\n";
  if (print_source) {
    const std::string source = gk::render(spec).text;
    out["source"] = source;
    text += "\n" + source;
  }
  output.print(out, text);
  return 0;
}

int cmd_tiles(const PlanOptions& args, const Output& output) {
  gk::Gemm plan = make_plan(args);
  const auto tiles = plan.tile_descriptions();
  std::string text;
  for (std::size_t i = 0; i < tiles.size(); ++i) text += "[" + std::to_string(i) + "] " + tiles[i].to_string() + "\n";
  output.print({{"count", tiles.size()}, {"tile_descriptions", tiles}}, text);
  return 0;
}

int cmd_compile(const PlanOptions& args, const Output& output) {
  gk::Gemm plan = make_plan(args);
  const gk::CompiledKernel built = plan.compile();
  output.print(built,
               "kernel: " + built.kernel_name + "\ncache:  " +
                   (built.cache_hit ? "hit" : "miss (compiled in " + std::to_string(built.build_seconds) + " s)") +
                   "\nmodule: " + built.module_path + "\n");
  return 0;
}

struct RunArgs {
  long m = 128, n = 128, k = 128, batch = 1, repeat = 10;
  double alpha = 1.0, beta = 0.0;
  bool check = false;
};

int cmd_run(const PlanOptions& args, const RunArgs& r, const Output& output) {
  using gk::testing::DeviceBuffer;
  using gk::testing::HostMatrix;
  gk::Gemm plan = make_plan(args);
  HostMatrix A(plan.element_a(), r.m, r.k, plan.layout_a(), r.batch);
  HostMatrix B(plan.element_b(), r.k, r.n, plan.layout_b(), r.batch);
  HostMatrix C(plan.element_c(), r.m, r.n, plan.layout_c(), r.batch);
  HostMatrix D(plan.element_d(), r.m, r.n, plan.layout_c(), r.batch);
  // Small integers: every product and sum is exact in the accumulator, so only D's rounding remains.
  A.fill_integers(1, -4, 4);
  B.fill_integers(2, -4, 4);
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
  for (long i = 0; i < r.repeat; ++i) plan.run(vA, vB, &vC, vD, r.alpha, r.beta, options);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, start, stop);
  const double seconds = ms / 1e3 / static_cast<double>(std::max(r.repeat, 1L));
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
  std::string text = "kernel: " + plan.kernel_name() + "\n" + std::to_string(tflops) + " TFLOP/s\n";
  if (!r.check) {
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

int cmd_cache(const std::string& what, const Output& output) {
  gk::DiskCache cache;
  Json out = {{"root", cache.root()}};
  if (what == "clear") {
    const std::size_t removed = cache.clear();
    out["removed"] = removed;
    output.print(out, "removed " + std::to_string(removed) + " entries from " + cache.root() + "\n");
    return 0;
  }
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
  text += "cache " + cache.root() + ": " + std::to_string(entries.size()) + " entries, " + std::to_string(total) +
          " bytes\n";
  output.print(out, text);
  return 0;
}

const char* error_kind(const std::exception& e) {
  if (dynamic_cast<const UsageError*>(&e)) return "UsageError";
  if (dynamic_cast<const gk::ConfigError*>(&e)) return "ConfigError";
  if (dynamic_cast<const gk::TensorError*>(&e)) return "TensorError";
  if (dynamic_cast<const gk::ToolchainError*>(&e)) return "ToolchainError";
  if (dynamic_cast<const gk::CompileError*>(&e)) return "CompileError";
  if (dynamic_cast<const gk::CudaError*>(&e)) return "CudaError";
  return "Error";
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substituted = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substituted});
    }
  }
  return row[b.size()];
}

// Words the command line did not take: an unknown option names its nearest valid one; an extra word is refused.
void refuse_leftovers(const CLI::App& app, const CLI::App* command) {
  const CLI::App& scope = command != nullptr ? *command : app;
  for (const std::string& word : scope.remaining(true)) {
    if (word.rfind("--", 0) != 0) {
      if (command == nullptr) throw UsageError("Unknown command '" + word + "'; run gemmkit help.");
      throw UsageError("Unexpected argument '" + word + "' for gemmkit " + command->get_name() + ".");
    }
    const std::string name = word.substr(0, word.find('='));
    std::string nearest;
    for (const CLI::Option* option : scope.get_options()) {
      for (const std::string& known : option->get_lnames()) {
        if (nearest.empty() || edit_distance(name, "--" + known) < edit_distance(name, nearest)) {
          nearest = "--" + known;
        }
      }
    }
    throw UsageError("Unknown option " + name + " for gemmkit " + scope.get_name() + "; did you mean " + nearest +
                     "? (gemmkit " + scope.get_name() + " --help lists them)");
  }
}

// CLI11's help with our usage line and the environment table below it.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    if (app->get_parent() != nullptr) return CLI::Formatter::make_usage(app, std::move(name));
    return "usage: gemmkit <command> [options] [--json]\n";
  }
};

}  // namespace

int main(int argc, char** argv) {
  Output output;
  output.json = std::any_of(argv + 1, argv + argc, [](const char* word) { return std::string(word) == "--json"; });
  CLI::App app("gemmkit: declare, compile and run CUTLASS GEMM kernels.", "gemmkit");
  app.formatter(std::make_shared<HelpFormatter>());
  app.footer("environment:\n" + gk::knobs::help_text());
  app.allow_extras();
  app.require_subcommand(0, 1);
  bool json = false;  // registered so that CLI11 accepts and documents --json; read from argv above, for errors too
  app.add_flag("--json", json, "print one JSON object");

  PlanOptions plan_args;
  RunArgs run_args;
  bool print_source = false;
  auto add_command = [&](const char* name, const char* help, bool builds_plan) {
    CLI::App* command = app.add_subcommand(name, help);
    command->allow_extras();
    command->add_flag("--json", json, "print one JSON object");
    if (builds_plan) plan_args.add_to(*command);
    return command;
  };
  CLI::App* plan = add_command("plan", "show the kernel a plan picks", true);
  plan->add_flag("--print-source", print_source, "also print the generated .cu");
  CLI::App* tiles = add_command("tiles", "list every valid configuration of a plan", true);
  CLI::App* compile =
      add_command("compile", "generate and compile the plan's kernel (through the on-disk cache)", true);
  CLI::App* run = add_command("run", "run the plan on the GPU on small-integer data", true);
  run->add_option("--m", run_args.m, "rows of A and D")->capture_default_str();
  run->add_option("--n", run_args.n, "columns of B and D")->capture_default_str();
  run->add_option("--k", run_args.k, "columns of A, rows of B")->capture_default_str();
  run->add_option("--batch", run_args.batch, "batch count")->capture_default_str();
  run->add_option("--alpha", run_args.alpha)->capture_default_str();
  run->add_option("--beta", run_args.beta)->capture_default_str();
  run->add_option("--repeat", run_args.repeat, "timed runs after the first")->capture_default_str();
  run->add_flag("--check", run_args.check, "compare D with a float64 reference");
  CLI::App* cache = add_command("cache", "the on-disk kernel cache", false);
  cache->require_subcommand(1);
  std::string cache_what;
  for (const char* what : {"ls", "info", "clear"}) {
    CLI::App* sub = cache->add_subcommand(what, std::string("cache ") + what);
    sub->add_flag("--json", json, "print one JSON object");
    sub->callback([&cache_what, what] { cache_what = what; });
  }
  CLI::App* demo = add_command("demo", "the basic GEMM walk-through (plan, compile, run, check)", false);
  CLI::App* help = add_command("help", "this text", false);

  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      std::cout << app.help();
      return 0;
    } catch (const CLI::ParseError& e) {
      throw UsageError(e.what());
    }
    const auto chosen = app.get_subcommands();
    refuse_leftovers(app, chosen.empty() ? nullptr : chosen.front());
    if (chosen.empty() || help->parsed()) {
      std::cout << app.help();
      return chosen.empty() ? 2 : 0;
    }
    if (plan->parsed()) return cmd_plan(plan_args, print_source, output);
    if (tiles->parsed()) return cmd_tiles(plan_args, output);
    if (compile->parsed()) return cmd_compile(plan_args, output);
    if (run->parsed()) return cmd_run(plan_args, run_args, output);
    if (cache->parsed()) return cmd_cache(cache_what, output);
    if (demo->parsed()) return basic_gemm_walkthrough(output.json);
    return 2;
  } catch (const std::exception& e) {
    if (output.json) {
      Json out = {{"error", error_kind(e)}, {"message", e.what()}};
      if (auto* ce = dynamic_cast<const gk::CompileError*>(&e)) out["source_path"] = ce->source_path;
      std::cout << out.dump(2) << "\n";
    } else {
      std::cerr << "gemmkit: " << error_kind(e) << ": " << e.what() << "\n";
    }
    return 1;
  }
}
