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
  const std::string expected = default_plan(gk::DataType::f16, ctx).kernel_name();
  // The one-pass module, then the split build (GEMMKIT_SPLIT_BUILD=1: a cubin and a host module, two nvcc processes
  // at once), each into an empty cache; SM80 kernels build in one pass either way.
  struct Path {
    const char* name;
    const char* split;
    int builds;
  };
  const bool splittable = ctx.cc >= 90;
  std::vector<Path> paths = {{"one pass", nullptr, 1}};
  if (splittable) paths.push_back({"split (cubin + host module)", "1", 2});
  SectionResult result;
  Table table{
      {"kernel", "build", "plan.compile() s", "of which nvcc build s", "Toolchain::discover() s", "child process s"},
      {}};
  for (const Path& path : paths) {
    std::printf("compile: cold compile of %s, %s, in a child process (about a minute) ...\n", expected.c_str(),
                path.name);
    std::fflush(stdout);
    ChildRun run;
    {
      TempCache cache;
      ScopedVariable split("GEMMKIT_SPLIT_BUILD", path.split);
      run = run_child(ctx.child_path, {"compile", "--cache-dir", cache.path(), "--cc", std::to_string(ctx.cc)});
    }
    const Value report = child_json(run, "cold compile");
    if (text(report, "kernel_name") != expected) {
      throw Failure("the child compiled " + text(report, "kernel_name") + ", not the default kernel " + expected);
    }
    const auto hit = report.find("cache_hit");
    if (number(report, "builds") != path.builds || hit == report.end() || !hit->is_boolean() || hit->get<bool>()) {
      throw Failure("the cold compile (" + std::string(path.name) + ") did not build exactly " +
                    std::to_string(path.builds) +
                    " artifacts in the empty cache (builds = " + fixed(number(report, "builds"), 0) + ")");
    }
    const double wall_s = static_cast<double>(run.exit_ns - run.spawn_ns) * 1e-9;
    Value entry = report;
    entry["process_wall_seconds"] = wall_s;
    if (path.split == nullptr) {
      result.json = entry;  // the one-pass numbers stay where they were
    } else {
      result.json["split"] = entry;
    }
    table.rows.push_back({expected, path.name, fixed(number(report, "compile_seconds"), 2),
                          fixed(number(report, "build_seconds"), 2), fixed(number(report, "toolchain_seconds"), 2),
                          fixed(wall_s, 2)});
  }
  result.markdown = "## Cold compile (empty GEMMKIT_CACHE_DIR, fresh process)\n\n" + table.markdown();
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
