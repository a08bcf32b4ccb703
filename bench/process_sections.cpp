// bench/process_sections.cpp: the sections measured in fresh child processes: cold compile and first result.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bench.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/jit.hpp"

namespace bench {
namespace {

namespace fs = std::filesystem;

// A fresh, empty cache folder, removed at scope exit.
class TempCache {
 public:
  TempCache() {
    std::string pattern = (fs::temp_directory_path() / "gemmkit-bench-cold-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw Failure("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempCache() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempCache(const TempCache&) = delete;
  TempCache& operator=(const TempCache&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

double number(const Value& v, const std::string& key) {
  const auto found = v.find(key);
  if (found == v.end() || !found->is_number()) throw Failure("the child's report has no number '" + key + "'");
  return found->get<double>();
}

std::string text(const Value& v, const std::string& key) {
  const auto found = v.find(key);
  if (found == v.end() || !found->is_string()) throw Failure("the child's report has no string '" + key + "'");
  return found->get<std::string>();
}

double ms_between(double from_ns, double to_ns) {
  return (to_ns - from_ns) * 1e-6;
}

}  // namespace

// Sets an environment variable for the children started in its scope, restoring it after.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedVariable() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

SectionResult compile_section(Context& ctx) {
  // Each kind's kernel cold, in a fresh process and an empty cache, one after another (nothing else building): the
  // default build (SM90 kernels: a cubin and a host module at once), and beside it the same kernel in one nvcc pass
  // (GEMMKIT_SPLIT_BUILD=0, how every kernel was built before the split build). On SM90
  // the _lean rows are the same plans on gemmkit's lean epilogue, which takes the epilogue at launch (bias + relu is
  // the plain kernel); the default kernels compile CUTLASS's TMA epilogue, with the activation a launch argument.
  struct Kind {
    const char* kind;
    const char* label;
    const char* epilogue;
    const char* split;  // GEMMKIT_SPLIT_BUILD for the child (null: the default)
  };
  std::vector<Kind> kinds;
  if (ctx.cc >= 90) {
    kinds = {{"gemm", "GEMM f16", "CUTLASS TMA (default)", nullptr},
             {"gemm_lean", "GEMM f16", "lean (at launch)", nullptr},
             {"gemm", "GEMM f16, one nvcc pass", "CUTLASS TMA (default)", "0"},
             {"bias_relu", "GEMM f16 + bias + relu", "CUTLASS TMA (default)", nullptr},
             {"bias_relu_lean", "GEMM f16 + bias + relu", "lean (at launch)", nullptr},
             {"fp8_scaled", "FP8 e4m3 -> bf16, row and column scales", "CUTLASS TMA (default)", nullptr},
             {"fp8_scaled_lean", "FP8 e4m3 -> bf16, row and column scales", "lean (at launch)", nullptr},
             {"fp8_scaled", "FP8 e4m3 -> bf16, row and column scales, one nvcc pass", "CUTLASS TMA (default)", "0"},
             {"grouped", "grouped GEMM f16", "CUTLASS (ptr-array TMA)", nullptr},
             {"grouped", "grouped GEMM f16, one nvcc pass", "CUTLASS (ptr-array TMA)", "0"},
             {"conv_fprop", "Conv2d fprop f16", "CUTLASS", nullptr},
             {"conv_fprop", "Conv2d fprop f16, one nvcc pass", "CUTLASS", "0"}};
  } else {
    kinds = {{"gemm", "GEMM f16", "CUTLASS 2.x", nullptr},
             {"grouped", "grouped GEMM f16", "CUTLASS 2.x", nullptr},
             {"conv_fprop", "Conv2d fprop f16", "CUTLASS 2.x", nullptr}};
  }
  SectionResult result;
  Table table{{"kernel kind", "epilogue", "plan.compile() s", "child process s", "kernel"}, {}};
  Value rows = Value::array();
  for (const Kind& k : kinds) {
    std::printf("compile: %s (%s%s), cold, in a child process (about a minute) ...\n", k.label, k.epilogue,
                k.split != nullptr ? ", one pass" : "");
    std::fflush(stdout);
    ChildRun run;
    {
      TempCache cache;
      ScopedVariable split("GEMMKIT_SPLIT_BUILD", k.split);
      run = run_child(ctx.child_path,
                      {"compile", "--cache-dir", cache.path(), "--cc", std::to_string(ctx.cc), "--kind", k.kind});
    }
    const Value report = child_json(run, "cold compile");
    const auto hit = report.find("cache_hit");
    if (hit == report.end() || !hit->is_boolean() || hit->get<bool>() || number(report, "builds") < 1) {
      throw Failure("the cold compile of " + std::string(k.kind) + " built nothing in the empty cache");
    }
    const double wall_s = static_cast<double>(run.exit_ns - run.spawn_ns) * 1e-9;
    Value entry = report;
    entry["label"] = k.label;
    entry["epilogue"] = k.epilogue;
    entry["one_pass"] = k.split != nullptr;
    entry["process_wall_seconds"] = wall_s;
    rows.push_back(entry);
    table.rows.push_back({std::string(k.label), k.epilogue, fixed(number(report, "compile_seconds"), 1),
                          fixed(wall_s, 1), text(report, "kernel_name")});
  }
  result.json["rows"] = rows;
  result.markdown =
      "## Cold compile (empty GEMMKIT_CACHE_DIR, fresh process, one kernel at a time)\n\n"
      "The default build of SM90 kernels (GEMM, grouped GEMM, Conv2d) runs nvcc twice at once (a cubin and a host "
      "module); the rows marked one nvcc pass build the same kernel as one module (GEMMKIT_SPLIT_BUILD=0). "
      "CUTLASS TMA: the default configuration (the f16 plan's activation taken at launch, one kernel for every "
      "activation; FP8's scale vectors compiled in); lean: the same tile on gemmkit's lean epilogue "
      "(epilogue schedule Lean), whose activation, bias and scale vectors are launch arguments (every plain "
      "epilogue of a plan shares the kernel).\n\n" +
      table.markdown();
  return result;
}

SectionResult startup_section(Context& ctx) {
  gk::Gemm plan = default_plan(gk::DataType::f16, ctx);
  const gk::KernelSpec spec = planned_spec(plan, {128, 128, 128});
  const gk::CompiledKernel built = gk::build_kernel(spec);
  if (!built.cache_hit)
    std::printf("startup: built %s first (the child must find it in the cache)\n", spec.name().c_str());
  std::printf("startup: %d fresh processes running 128^3 once ...\n", ctx.options.startup_runs);
  std::fflush(stdout);
  std::vector<double> to_main, to_plan, to_buffers, to_result, wall;
  Value runs = Value::array();
  for (int i = 0; i < ctx.options.startup_runs; ++i) {
    const ChildRun run = run_child(ctx.child_path, {"first-result"});
    const Value report = child_json(run, "first result");
    if (number(report, "builds") != 0) throw Failure("the child compiled a kernel: the cache was not warm");
    if (number(report, "max_abs_error") != 0) {
      throw Failure("the child's 128^3 result is wrong (max abs error " + fixed(number(report, "max_abs_error"), 3) +
                    " on exact integer data)");
    }
    if (text(report, "kernel_name") != built.kernel_name) {
      throw Failure("the child ran " + text(report, "kernel_name") + ", not " + built.kernel_name);
    }
    const double main_ns = number(report, "main_entry_ns");
    Value r = Value::object();
    r["spawn_to_main_ms"] = ms_between(static_cast<double>(run.spawn_ns), main_ns);
    r["main_to_plan_ms"] = ms_between(main_ns, number(report, "plan_ready_ns"));
    r["main_to_buffers_ms"] = ms_between(main_ns, number(report, "buffers_ready_ns"));
    r["main_to_result_ms"] = ms_between(main_ns, number(report, "result_ns"));
    r["process_wall_ms"] = static_cast<double>(run.exit_ns - run.spawn_ns) * 1e-6;
    to_main.push_back(r.at("spawn_to_main_ms").get<double>());
    to_plan.push_back(r.at("main_to_plan_ms").get<double>());
    to_buffers.push_back(r.at("main_to_buffers_ms").get<double>());
    to_result.push_back(r.at("main_to_result_ms").get<double>());
    wall.push_back(r.at("process_wall_ms").get<double>());
    runs.push_back(r);
  }
  SectionResult result;
  result.json["kernel_name"] = built.kernel_name;
  result.json["runs"] = runs;
  Value medians = Value::object();
  medians["spawn_to_main_ms"] = median(to_main);
  medians["main_to_plan_ms"] = median(to_plan);
  medians["main_to_buffers_ms"] = median(to_buffers);
  medians["main_to_result_ms"] = median(to_result);
  medians["process_wall_ms"] = median(wall);
  result.json["median"] = medians;
  Table table{{"median of " + std::to_string(ctx.options.startup_runs) + " runs", "ms"},
              {{"spawn -> main() (exec, dynamic loading)", fixed(median(to_main), 1)},
               {"main() -> plan constructed", fixed(median(to_plan), 1)},
               {"main() -> device buffers ready", fixed(median(to_buffers), 1)},
               {"main() -> first result (run + sync)", fixed(median(to_result), 1)},
               {"spawn -> exit (whole process)", fixed(median(wall), 1)}}};
  result.markdown = "## Time to first result (fresh process, warm disk cache, 128x128x128 f16)\n\n" + table.markdown();
  return result;
}

}  // namespace bench
