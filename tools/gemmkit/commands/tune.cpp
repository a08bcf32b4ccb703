// tools/gemmkit/commands/tune.cpp: gemmkit tune: one shape, the shape suite (or only its candidates compiled), or
// the tuning database exported and imported.
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "commands/commands.hpp"
#include "gemmkit/cache.hpp"
#include "gemmkit/jit.hpp"
#include "gemmkit/tuning.hpp"
#include "plan_options.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"
#include "verify/shape_suite.hpp"

namespace gk = gemmkit;

namespace gemmkit::cli {
namespace {

// gemmkit tune's own options.
std::vector<OptionRow> tune_table() {
  std::string groups;
  for (const auto& g : gk::verify::suite_groups()) groups += (groups.empty() ? "" : ",") + g;
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
           (void)gk::verify::shape_suite(text);
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

// Row-major-or-as-declared operands of the plan's types on the GPU, uniform in [-1, 1), for one tuning problem.
struct TuneOperands {
  TuneOperands(const gk::Gemm& plan, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch)
      : A(plan.element_a(), m, k, plan.layout_a(), batch),
        B(plan.element_b(), k, n, plan.layout_b(), batch),
        D(plan.element_d(), m, n, plan.layout_c(), batch) {
    A.fill_uniform(11);
    B.fill_uniform(12);
    dA = std::make_unique<gk::verify::DeviceBuffer>(A);
    dB = std::make_unique<gk::verify::DeviceBuffer>(B);
    dD = std::make_unique<gk::verify::DeviceBuffer>(D);
  }
  gk::verify::HostMatrix A, B, D;
  std::unique_ptr<gk::verify::DeviceBuffer> dA, dB, dD;
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
    Json out = tune_shape(gemm_plan(*plan), r.m, r.n, r.k, r.batch, options, text);
    output.print(out, text + "database: " + out.value("database", "") + "\n");
    return 0;
  }
  // The suite: f16 and bf16 (unless --element says) with f32 accumulation (unless --element-accumulator says), every
  // kernel compiled first in one parallel batch.
  std::vector<gk::DataType> elements = {gk::DataType::f16, gk::DataType::bf16};
  if (args.given("element")) elements = {*args.enumerator<gk::DataType>("element")};
  const auto shapes = gk::verify::shape_suite(args.text("suite-groups").value_or(""));
  std::vector<std::unique_ptr<gk::Plan>> plans;
  std::map<std::string, gk::KernelSpec> unique;
  for (const gk::DataType element : elements) {
    plans.push_back(make_plan(args, false, [&](gk::GemmOptions& o) {
      o.element = element;
      if (!args.given("element-accumulator")) o.element_accumulator = gk::DataType::f32;
    }));
    gk::Gemm& plan = gemm_plan(*plans.back());
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
        row = tune_shape(gemm_plan(*plans[p]), s.m, s.n, s.k, 1, options, text);
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

}  // namespace

Command add_tune(CLI::App& gemmkit, Shared& shared) {
  CLI::App* app = add_command(gemmkit, "tune",
                              "time the plan's best configurations on the GPU for a shape (or the shape suite) and "
                              "store the fastest in the tuning database, which run() then uses",
                              shared);
  shared.values.add_to(*app, plan_table());
  shared.values.add_to(*app, problem_table());
  shared.values.add_to(*app, tune_table());
  struct Flags {
    bool suite = false, prebuild = false;
  };
  auto flags = std::make_shared<Flags>();
  add_flag(*app, "--suite", flags->suite, "tune the benchmark's shape suite (f16 and bf16 unless --element is given)");
  add_flag(*app, "--prebuild", flags->prebuild,
           "with --suite and --cc: only compile the candidates into the cache (no GPU needed), for a GPU machine "
           "that then tunes from the cache");
  return {app, [&shared, flags] {
            if (shared.values.given("suite-groups") && !flags->suite) {
              throw UsageError("--suite-groups needs --suite.");
            }
            return cmd_tune(shared.values, flags->suite, flags->prebuild, shared.output);
          }};
}

}  // namespace gemmkit::cli
