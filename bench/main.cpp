// bench/main.cpp: gemmkit_bench: options, environment record, kernel preparation, the sections, JSON + Markdown out.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "bench.hpp"
#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/jit.hpp"
#include "verify/shape_suite.hpp"

namespace bench {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage = R"(usage: gemmkit_bench [options]

Benchmarks gemmkit against cuBLAS on this machine's GPU 0 and writes JSON + Markdown results.

  --out DIR            results folder (default bench/results, relative to the working directory)
  --only LIST          sections to run, comma-separated: gemm,overhead,startup,compile,sweep,epilogue,suite
                       (default: the first four)
  --groups LIST        the suite section's shape groups: today,square,long_k,llm16,llm128,llm1024,llm8192,skinny,
                       odd (odd leading dimensions: the SIMT fallback; its mean is its own line), llm (the four llm
                       groups) or all (default all)
  --tuning on|off      off: run() ignores the tuning database (GEMMKIT_TUNING_DB=off), i.e. the untuned default
                       (default on: a shape tuned with gemmkit tune runs its tuned kernel; rows say so)
  --overhead-shape MxNxK  the overhead section's problem (default 128x128x128)
  --configs REGEX      the sweep section's configurations: those whose text (e.g. "128x64x64 c2x1
                       ScheduleAuto/ScheduleAuto", "... StreamK") the regular expression finds (default all)
  --max-swizzle N      every gemmkit plan's max_swizzle_size: 1, 2, 4 or 8 (SM90 persistent tile schedulers;
                       default: the plan's own)
  --raster-order ORDER every gemmkit plan's raster order: AlongM or AlongN (SM90 persistent tile schedulers;
                       default: CUTLASS's heuristic)
  --shapes LIST        GEMM shapes MxNxK, comma-separated
                       (default 2400x3232x4096,4096x4096x4096,8192x8192x8192,16384x16384x16384)
  --dtypes LIST        f16,bf16 (default both)
  --warmup N           untimed calls per library before a GEMM row is timed, at least (default 10)
  --warmup-ms MS       ... and at least this long per library, so the clocks settle (default 500)
  --iters N            calls per timed batch (default: calibrated so a batch takes >= --batch-ms)
  --batch-ms MS        target batch duration when --iters is not given (default 100)
  --repeats N          timed batches per library per GEMM row; the median is reported (default 9)
  --calls N            calls per host-overhead measurement (default 10000)
  --startup-runs N     child processes for the time-to-first-result section (default 5)
  --cc N               without a CUDA device: the compile section's target (the one section that needs no GPU;
                       --only compile --cc 90 times SM90 builds on a build machine)
  --prebuild-cc N      only build the kernels the chosen sections need on a GPU of compute capability N, into the
                       cache, and stop: no GPU needed (a build machine fills the cache the GPU machine runs from)
  --help               this text

Exit status: 0 all measurements valid; 1 a check or a section failed (results are still written, with
"_FAILED" in the file names); 2 bad usage or no CUDA device.
)";

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, separator);) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::int64_t positive(const std::string& text, const std::string& option) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || value <= 0) {
    throw UsageError(option + " expects a positive integer; got '" + text + "'");
  }
  return value;
}

Shape parse_shape(const std::string& text) {
  const auto parts = split(text, 'x');
  if (parts.size() != 3) throw UsageError("--shapes: '" + text + "' is not MxNxK");
  Shape s{positive(parts[0], "--shapes"), positive(parts[1], "--shapes"), positive(parts[2], "--shapes")};
  if (s.m > INT32_MAX || s.n > INT32_MAX || s.k > INT32_MAX || s.m % 8 || s.n % 8 || s.k % 8) {
    throw UsageError("--shapes: every extent of '" + text +
                     "' must be a multiple of 8 below 2^31 (the default "
                     "kernel's 16-byte alignment)");
  }
  return s;
}

const std::set<std::string> kValueOptions = {"--groups",         "--tuning",      "--out",         "--only",
                                             "--shapes",         "--dtypes",      "--warmup",      "--warmup-ms",
                                             "--iters",          "--batch-ms",    "--repeats",     "--calls",
                                             "--startup-runs",   "--prebuild-cc", "--cc",          "--configs",
                                             "--overhead-shape", "--max-swizzle", "--raster-order"};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i], value;
    if (name.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + name + "'");
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (name != "--help") {
      if (!kValueOptions.count(name)) throw UsageError("unknown option " + name);
      if (i + 1 >= argc) throw UsageError(name + " needs a value");
      value = argv[++i];
    }
    if (name == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (name == "--out") {
      o.out_dir = value;
    } else if (name == "--only") {
      o.sections.clear();
      for (const auto& s : split(value, ',')) {
        if (s != "gemm" && s != "overhead" && s != "startup" && s != "compile" && s != "sweep" && s != "epilogue" &&
            s != "suite") {
          throw UsageError("--only: unknown section '" + s +
                           "'; use gemm, overhead, startup, compile, sweep, epilogue, suite");
        }
        o.sections.insert(s);
      }
    } else if (name == "--groups") {
      try {
        (void)gk::verify::shape_suite(value, gk::verify::SuiteGroups::WithOdd);
      } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--groups: ") + e.what());
      }
      o.groups = value;
    } else if (name == "--overhead-shape") {
      o.overhead_shape = parse_shape(value);
    } else if (name == "--configs") {
      try {
        (void)std::regex(value);
      } catch (const std::regex_error& e) {
        throw UsageError("--configs: '" + value + "' is not a regular expression (" + e.what() + ")");
      }
      o.configs = value;
    } else if (name == "--max-swizzle") {
      o.max_swizzle = static_cast<int>(positive(value, name));
      if (o.max_swizzle != 1 && o.max_swizzle != 2 && o.max_swizzle != 4 && o.max_swizzle != 8) {
        throw UsageError("--max-swizzle: expects 1, 2, 4 or 8; got " + value);
      }
    } else if (name == "--raster-order") {
      const auto order = gk::parse_enum<gk::RasterOrder>(value);
      if (!order || *order == gk::RasterOrder::Heuristic) {
        throw UsageError("--raster-order: expects AlongM or AlongN; got '" + value + "'");
      }
      o.raster_order = *order;
    } else if (name == "--prebuild-cc") {
      o.prebuild_cc = static_cast<int>(positive(value, name));
    } else if (name == "--cc") {
      o.cc = static_cast<int>(positive(value, name));
    } else if (name == "--tuning") {
      if (value != "on" && value != "off") throw UsageError("--tuning: expects on or off; got '" + value + "'");
      if (value == "off") setenv("GEMMKIT_TUNING_DB", "off", 1);  // before any plan runs
    } else if (name == "--shapes") {
      o.shapes.clear();
      for (const auto& s : split(value, ',')) o.shapes.push_back(parse_shape(s));
    } else if (name == "--dtypes") {
      o.dtypes.clear();
      for (const auto& s : split(value, ',')) {
        const auto t = gk::parse_enum<gk::DataType>(s);
        if (!t || (*t != gk::DataType::f16 && *t != gk::DataType::bf16)) {
          throw UsageError("--dtypes: '" + s + "' is not f16 or bf16");
        }
        o.dtypes.push_back(*t);
      }
    } else if (name == "--warmup") {
      o.warmup = static_cast<int>(positive(value, name));
    } else if (name == "--warmup-ms") {
      o.warmup_ms = static_cast<double>(positive(value, name));
    } else if (name == "--iters") {
      o.iters = static_cast<int>(positive(value, name));
    } else if (name == "--batch-ms") {
      o.batch_ms = static_cast<double>(positive(value, name));
    } else if (name == "--repeats") {
      o.repeats = static_cast<int>(positive(value, name));
    } else if (name == "--calls") {
      o.calls = static_cast<int>(positive(value, name));
    } else if (name == "--startup-runs") {
      o.startup_runs = static_cast<int>(positive(value, name));
    } else {
      throw UsageError("unknown option " + name);
    }
  }
  if (o.sections.empty()) throw UsageError("--only names no section");
  if (o.shapes.empty() || o.dtypes.empty()) throw UsageError("--shapes and --dtypes must name at least one value");
  return o;
}

std::string utc_now(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, format, &tm);
  return buffer;
}

std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// The machine, the versions and the command; `gpu`: whether a CUDA device (and cuBLAS) takes part.
Value environment(const Context& ctx, int argc, char** argv, bool gpu) {
  const gk::Toolchain& toolchain = gk::Toolchain::discover();
  int driver = 0, runtime = 0, cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
  Value device = Value::object();
  if (gpu) {
    const gk::DeviceInfo& info = gk::device_info(ctx.device);
    BENCH_CUDA(cudaDriverGetVersion(&driver));
    BENCH_CUBLAS(cublasGetProperty(MAJOR_VERSION, &cublas_major));
    BENCH_CUBLAS(cublasGetProperty(MINOR_VERSION, &cublas_minor));
    BENCH_CUBLAS(cublasGetProperty(PATCH_LEVEL, &cublas_patch));
    std::size_t free_bytes = 0, total_bytes = 0;
    BENCH_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    device["id"] = ctx.device;
    device["name"] = info.name;
    device["cc"] = info.cc;
    device["sm_count"] = info.sm_count;
    device["memory_gib"] = static_cast<double>(total_bytes) / (1024.0 * 1024.0 * 1024.0);
  } else {
    device["name"] = "none (a build machine: " + std::to_string(std::thread::hardware_concurrency()) + " cores)";
    device["cc"] = ctx.cc;
    device["sm_count"] = 0;
  }
  BENCH_CUDA(cudaRuntimeGetVersion(&runtime));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);

  Value env = Value::object();
  env["date_utc"] = utc_now("%Y-%m-%dT%H:%M:%SZ");
  env["host"] = host;
  env["command"] = command;
  env["device"] = device;
  env["cuda_driver_version"] = cuda_version_text(driver);  // the CUDA version the driver supports
  env["cuda_runtime_version"] = cuda_version_text(runtime);
  env["cublas_version"] =
      std::to_string(cublas_major) + "." + std::to_string(cublas_minor) + "." + std::to_string(cublas_patch);
  env["nvcc_version"] = toolchain.nvcc_version;
  env["nvcc_build"] = toolchain.nvcc_build;
  env["host_compiler"] = toolchain.host_compiler;
  env["cutlass_version"] = toolchain.cutlass_version;
  env["cutlass_root"] = toolchain.cutlass_root;
  env["gemmkit_version"] = GEMMKIT_BENCH_VERSION;
  env["cache_root"] = gk::DiskCache::default_root();
  return env;
}

Value method() {
  Value m = Value::object();
  m["gemm"] =
      "Per dtype and shape: A, B uniform [-1,1) (host generator, copied once); gemmkit's default plan and "
      "cublasGemmEx (CUBLAS_COMPUTE_32F, D^T = B^T A^T, 32 MiB workspace) on one non-blocking stream. One call "
      "each is verified first (gemmkit vs cuBLAS on every element, both vs a float64 reference on 256 samples; "
      "bound: 2 output ulps relative to max(|x|, sqrt(K/9)); D pre-filled with NaN). Then interleaved warm-up calls "
      "(>= 10 and >= 500 ms per library), then "
      "repeats x (one batch per library, alternating which goes first), each batch = iters back-to-back calls "
      "timed by CUDA events; reported time = median over batches of ms per call; gemmkit's output is checked "
      "again after timing. TFLOP/s = 2MNK / time. ratio = cuBLAS time / gemmkit time (> 1: gemmkit faster).";
  m["overhead"] =
      "128^3 f16, device tensors, cached and loaded kernel, TensorViews built once. Launch only: host "
      "steady_clock time of calls with sync=false, in chunks of 200 with a synchronize between chunks outside "
      "the timed region (mean over all calls, and median of chunk means). Launch + sync: each call with "
      "sync=true timed on its own (median, mean, p90). The same for cublasGemmEx (+ cudaStreamSynchronize).";
  m["startup"] =
      "A fresh process (gemmkit_bench_child, linked with gemmkit only, not cuBLAS) constructs the default f16 "
      "plan, allocates and fills 128^3 device tensors, runs once with sync, checks exactly. Times: the parent's "
      "posix_spawn to the child's main(), the child's main() to each phase, spawn to exit. Warm disk cache; "
      "the CUDA driver files are in the page cache (the parent has used them).";
  m["suite"] =
      "The gemm section's method on every shape of the chosen groups of the shape suite (verify/shape_suite.hpp), "
      "f16 and bf16, packed row-major operands (lda = K, ldb = N, ldd = N); each row names the kernel run() picked. "
      "Geometric mean of the ratio per group and over the shapes with M >= 128 but those of the odd group, whose odd "
      "leading dimensions fit no tensor-core kernel's vectors (run() falls back to CUTLASS 2.x SIMT kernels; cuBLAS "
      "takes them as they are). 'tuned': run() took the kernel from the tuning database (gemmkit tune); --tuning off "
      "measures the untuned default.";
  m["compile"] =
      "A fresh process sets GEMMKIT_CACHE_DIR to a new empty folder and times Toolchain::discover() and then "
      "plan.compile() of the default f16 kernel (one nvcc process); the folder is removed afterwards.";
  return m;
}

// Builds every kernel the sections need before anything is timed, in parallel (cache hits cost nothing).
Value prepare_kernels(const Context& ctx) {
  std::vector<std::pair<gk::DataType, Shape>> problems;
  if (ctx.options.sections.count("gemm")) {
    for (const gk::DataType t : ctx.options.dtypes) {
      for (const Shape& s : ctx.options.shapes) problems.emplace_back(t, s);
    }
  }
  if (ctx.options.sections.count("suite")) {
    for (const gk::DataType t : ctx.options.dtypes) {
      for (const auto& s : gk::verify::shape_suite(ctx.options.groups, gk::verify::SuiteGroups::WithOdd)) {
        problems.emplace_back(t, Shape{s.m, s.n, s.k});
      }
    }
  }
  if (ctx.options.sections.count("sweep")) {
    for (const Shape& s : sweep_shapes(ctx)) problems.emplace_back(gk::DataType::f16, s);
  }
  if (ctx.options.sections.count("overhead")) problems.emplace_back(gk::DataType::f16, ctx.options.overhead_shape);
  if (ctx.options.sections.count("startup")) problems.emplace_back(gk::DataType::f16, Shape{128, 128, 128});
  std::map<std::string, gk::KernelSpec> unique;  // run() may pick a kernel per problem shape
  for (const auto& [t, s] : problems) {
    gk::Gemm plan = default_plan(t, ctx);
    const gk::KernelSpec spec = planned_spec(plan, s);
    unique.emplace(spec.canonical(), spec);
  }
  if (ctx.options.sections.count("sweep")) {
    for (const gk::KernelSpec& spec : sweep_kernels(ctx)) unique.emplace(spec.canonical(), spec);
  }
  if (ctx.options.sections.count("epilogue")) {
    for (const gk::KernelSpec& spec : epilogue_kernels(ctx)) unique.emplace(spec.canonical(), spec);
  }
  std::vector<gk::KernelSpec> specs;
  for (auto& [key, spec] : unique) specs.push_back(spec);
  std::printf("preparing %zu kernel(s) in %s (a cache miss runs nvcc, about 45 s) ...\n", specs.size(),
              gk::DiskCache::default_root().c_str());
  std::fflush(stdout);
  const auto entries = gk::compile_many(specs);
  Value out = Value::array();
  for (const auto& e : entries) {
    Value v = Value::object();
    v["kernel_name"] = e.kernel_name;
    v["cache_hit"] = e.cache_hit;
    v["build_seconds"] = e.build_seconds;
    out.push_back(v);
    // A build machine's list of what to carry to the GPU machine (tools/dev/carry-cache --keys).
    if (ctx.options.prebuild_cc > 0) std::printf("  %s %s\n", e.cache_key.c_str(), e.kernel_name.c_str());
  }
  return out;
}

std::string environment_markdown(const Value& env) {
  const Value& d = env.at("device");
  auto s = [](const Value& v, const char* key) { return v.at(key).get<std::string>(); };
  auto n = [](const Value& v, const char* key) { return fixed(v.at(key).get<double>(), 0); };
  const bool gpu = d.contains("id");
  const std::string device = gpu ? "- device: " + s(d, "name") + " (cc " + n(d, "cc") + ", " + n(d, "sm_count") +
                                       " SMs)\n- CUDA driver " + s(env, "cuda_driver_version") + ", runtime "
                                 : "- device: " + s(d, "name") + ", kernels for cc " + n(d, "cc") + "\n- CUDA runtime ";
  return "# gemmkit_bench " + s(env, "date_utc") + "\n\n" + device + s(env, "cuda_runtime_version") +
         (gpu ? ", cuBLAS " + s(env, "cublas_version") : std::string()) + ", nvcc " + s(env, "nvcc_version") +
         ", CUTLASS " + s(env, "cutlass_version") + ", gemmkit " + s(env, "gemmkit_version") + "\n- command: `" +
         s(env, "command") + "`\n\n";
}

// A stream and a cuBLAS handle bound to it, with an explicit workspace (as frameworks configure it).
struct CublasSetup {
  explicit CublasSetup(Context& ctx) : workspace(32u << 20) {
    BENCH_CUDA(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
    stream = ctx.stream;
    BENCH_CUBLAS(cublasCreate(&ctx.cublas));
    handle = ctx.cublas;
    BENCH_CUBLAS(cublasSetStream(handle, stream));
    BENCH_CUBLAS(cublasSetWorkspace(handle, workspace.get(), workspace.bytes()));
  }
  ~CublasSetup() {
    if (handle != nullptr) cublasDestroy(handle);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  CublasSetup(const CublasSetup&) = delete;
  CublasSetup& operator=(const CublasSetup&) = delete;
  DeviceBuffer workspace;
  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;
};

int run(int argc, char** argv) {
  Context ctx;
  try {
    ctx.options = parse_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "gemmkit_bench: %s\n\n%s", e.what(), kUsage);
    return 2;
  }
  if (ctx.options.prebuild_cc > 0) {
    ctx.device = 0;  // the placeholder views' device; spec_for reads no memory
    ctx.cc = ctx.options.prebuild_cc;
    const Value built = prepare_kernels(ctx);
    std::printf("%zu kernel(s) ready for cc %d\n", built.size(), ctx.cc);
    return 0;
  }
  // Without a device only the compile section runs, for the target --cc names.
  const bool gpu = gk::cuda_device_count() > 0;
  if (!gpu && (ctx.options.sections != std::set<std::string>{"compile"} || ctx.options.cc == 0)) {
    std::fprintf(stderr, "gemmkit_bench: needs a CUDA device (without one: --only compile --cc N)\n");
    return 2;
  }
  ctx.device = 0;
  if (gpu) {
    BENCH_CUDA(cudaSetDevice(0));
    ctx.cc = gk::device_info(ctx.device).cc;
  } else {
    ctx.cc = ctx.options.cc;
  }
  ctx.child_path = (fs::read_symlink("/proc/self/exe").parent_path() / "gemmkit_bench_child").string();
  if ((ctx.options.sections.count("startup") || ctx.options.sections.count("compile")) && !fs::exists(ctx.child_path)) {
    throw Failure(ctx.child_path +
                  " is missing: build the gemmkit_bench_child target (it is built with gemmkit_bench)");
  }
  std::optional<CublasSetup> cublas;
  if (gpu) cublas.emplace(ctx);

  Value doc = Value::object();
  const Value env = environment(ctx, argc, argv, gpu);
  doc["environment"] = env;
  doc["method"] = method();
  if (gpu) doc["prepared_kernels"] = prepare_kernels(ctx);
  std::string markdown = environment_markdown(env);
  bool ok = true;
  const std::pair<const char*, SectionResult (*)(Context&)> sections[] = {
      {"gemm", gemm_section},       {"overhead", overhead_section}, {"startup", startup_section},
      {"compile", compile_section}, {"sweep", sweep_section},       {"epilogue", epilogue_section},
      {"suite", suite_section}};
  for (const auto& [name, section] : sections) {
    if (!ctx.options.sections.count(name)) continue;
    SectionResult r;
    try {
      r = section(ctx);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gemmkit_bench: FAILED section %s: %s\n", name, e.what());
      r.ok = false;
      r.json = Value::object();
      r.json["error"] = e.what();
      r.markdown = "## " + std::string(name) + "\n\n**FAILED**: " + e.what() + "\n";
    }
    r.json["ok"] = r.ok;
    ok = ok && r.ok;
    doc[name] = r.json;
    markdown += r.markdown + "\n";
  }
  doc["ok"] = ok;
  if (!ok) markdown += "**Some measurements FAILED; the numbers above that are marked FAILED are not results.**\n";

  fs::create_directories(ctx.options.out_dir);
  const std::string stem =
      (fs::path(ctx.options.out_dir) / ("gemmkit_bench_" + utc_now("%Y-%m-%d_%H%M%SZ") + (ok ? "" : "_FAILED")))
          .string();
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream file(path);
    file << text;
    if (!file.flush()) throw Failure("could not write " + path);
  };
  write(stem + ".json", doc.dump(2) + "\n");
  write(stem + ".md", markdown);
  std::cout << "\n" << markdown << "\nwrote " << stem << ".json and " << stem << ".md\n";
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  try {
    return bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemmkit_bench: %s\n", e.what());
    return 1;
  }
}
