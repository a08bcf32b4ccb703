// src/jit/nvcc.cpp: the nvcc command line, one nvcc pass per kernel module, and the parallel-job limit.
#include <sched.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "jit/process.hpp"
#include "util/knobs.hpp"

namespace fs = std::filesystem;

namespace gemmkit {
namespace {

constexpr long long kBytesPerCompile = 4LL << 30;  // a CUTLASS SM90 translation unit peaks near 4 GiB in cicc/ptxas
constexpr int kLogLinesInMessage = 40;

// "sm_90a" -> "-gencode=arch=compute_90a,code=sm_90a".
std::string gencode_flag(const std::string& arch_flag) {
  static const std::regex kArch(R"(sm_(\d+[a-z]?))");
  std::smatch match;
  if (!std::regex_match(arch_flag, match, kArch)) {
    throw ConfigError("arch flag '" + arch_flag + "' is not of the form sm_<cc>[a], e.g. sm_90a or sm_80");
  }
  return "-gencode=arch=compute_" + match[1].str() + ",code=sm_" + match[1].str();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw Error("cannot write " + path.string() + "; check that the folder is writable and the disk not full");
}

std::string head_lines(const std::string& text, int lines) {
  std::size_t pos = 0;
  for (int i = 0; i < lines && pos != std::string::npos; ++i) {
    pos = text.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos || pos >= text.size()) return text;
  return text.substr(0, pos) + "[... see compile.log for the rest]\n";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The module's SASS through the toolkit's cuobjdump (GEMMKIT_DUMP_SASS): a debugging aid, so a failure only warns.
void dump_sass(const Toolchain& toolchain, const fs::path& module_path, const fs::path& sass_path) {
  const std::vector<std::string> argv = {(fs::path(toolchain.cuda_home) / "bin" / "cuobjdump").string(), "-sass",
                                         module_path.string()};
  try {
    const ProcessResult result = run_process(argv, {{}, /*capture_stderr=*/false});
    if (result.exit_code == 0) return write_file(sass_path, result.output);
    std::cerr << "gemmkit: GEMMKIT_DUMP_SASS: `" << shell_quote(argv) << "` exited with " << result.exit_code << "\n";
  } catch (const ToolchainError& e) {
    std::cerr << "gemmkit: GEMMKIT_DUMP_SASS: " << e.what() << "\n";
  }
}

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// MemAvailable from /proc/meminfo in bytes, or -1 when unknown.
long long available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  long long kib = 0;
  std::string unit;
  while (meminfo >> name >> kib >> unit) {
    if (name == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

}  // namespace

namespace {

// The language and optimization flags of every compile.
const std::vector<std::string> kLanguageFlags = {"-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr"};

// The host-side flags of a module (.so): position independent, optimized, CUTLASS's template statics private to each
// module (else two modules share device caches), linked against the shared CUDA runtime.
const std::vector<std::string> kSharedObjectFlags = {
    "-Xcompiler=-fPIC", "-Xcompiler=-O2", "-Xcompiler=-fvisibility=hidden", "-Xcompiler=-fno-gnu-unique", "-shared",
    "-cudart",          "shared"};

// CUTLASS's diagnostics, the target and the include paths.
std::vector<std::string> target_flags(const Toolchain& toolchain, const KernelSource& source) {
  return {"-Xcudafe",
          "--diag_suppress=esa_on_defaulted_function_ignored",
          gencode_flag(source.arch_flag),
          "-I" + toolchain.cutlass_root + "/include",
          "-I" + toolchain.cutlass_root + "/tools/util/include",
          "-I" + toolchain.device_include_dir};
}

std::vector<std::string> command(const Toolchain& toolchain, std::vector<std::vector<std::string>> parts) {
  std::vector<std::string> argv = {toolchain.nvcc};
  for (auto& part : parts) argv.insert(argv.end(), part.begin(), part.end());
  return argv;
}

}  // namespace

std::vector<std::string> nvcc_command(const Toolchain& toolchain, const KernelSource& source,
                                      const std::string& source_path, const std::string& output_path) {
  return command(
      toolchain,
      {kLanguageFlags, kSharedObjectFlags, target_flags(toolchain, source), {source_path, "-o", output_path}});
}

std::vector<std::string> split_command(const Toolchain& toolchain, const KernelSource& source, SplitArtifact artifact,
                                       const std::string& source_path, const std::string& output_path) {
  if (artifact == SplitArtifact::cubin) {
    return command(toolchain, {kLanguageFlags,
                               target_flags(toolchain, source),
                               {"-cubin", "-DGEMMKIT_SPLIT_DEVICE", source_path, "-o", output_path}});
  }
  return command(toolchain, {kLanguageFlags,
                             kSharedObjectFlags,
                             target_flags(toolchain, source),
                             {"-DGEMMKIT_SPLIT_HOST", source_path, "-o", output_path}});
}

namespace {

// Runs one nvcc command that builds work_dir/<output> from work_dir/kernel.cu (written here) and writes the build
// record; throws CompileError on failure. `main_source` is what nvcc compiles (kernel.cu, or a wrapper including it).
void run_nvcc(const Toolchain& toolchain, const KernelSource& source, const fs::path& dir, const std::string& output,
              const std::string& main_source,
              const std::function<std::vector<std::string>(const std::string&, const std::string&)>& make_argv) {
  fs::create_directories(dir);
  const fs::path source_path = dir / "kernel.cu";
  const fs::path module_path = dir / output;
  write_file(source_path, source.text);
  const fs::path compiled_path = dir / main_source;
  if (main_source != "kernel.cu") write_file(compiled_path, kSplitHostWrapper);

  std::vector<std::string> argv = make_argv(compiled_path.string(), module_path.string());
  if (knobs::flag("GEMMKIT_KEEP_TEMP")) {
    fs::create_directories(dir / "nvcc");
    argv.insert(argv.begin() + 1, {"--keep", "--keep-dir", (dir / "nvcc").string()});
  }
  if (knobs::flag("GEMMKIT_VERBOSE")) std::cerr << "gemmkit: " << shell_quote(argv) << std::endl;
  const auto start = std::chrono::steady_clock::now();
  // nvcc's own temporary files (tmpxft_*) go inside the build folder, so an interrupted build leaves none in /tmp.
  const fs::path nvcc_tmp = dir / "nvcc-tmp";
  fs::create_directories(nvcc_tmp);
  ProcessOptions options;
  options.environment = {"TMPDIR=" + nvcc_tmp.string()};
  options.own_group = true;
  const ProcessResult result = run_process(argv, options);
  std::error_code ignored;
  fs::remove_all(nvcc_tmp, ignored);
  nlohmann::ordered_json record = {{"nvcc_argv", argv}, {"seconds", {{"nvcc", seconds_since(start)}}}};

  std::error_code ec;
  if (result.exit_code == 0 && fs::is_regular_file(module_path, ec)) {
    if (knobs::flag("GEMMKIT_DUMP_SASS")) {
      const auto dump_start = std::chrono::steady_clock::now();
      dump_sass(toolchain, module_path, dir / "kernel.sass");
      record["seconds"]["dump_sass"] = seconds_since(dump_start);
    }
    write_file(dir / kBuildRecordFile, record.dump(2) + "\n");
    return;
  }

  const fs::path log_path = dir / "compile.log";
  write_file(log_path, "$ " + shell_quote(argv) + "\n" + result.output);
  std::ostringstream message;
  message << "nvcc failed to build kernel " << source.kernel_name << " for " << source.arch_flag << " (exit code "
          << result.exit_code << (result.exit_code == 0 ? ", but it wrote no " + output : "")
          << (result.exit_code > 128 ? ": killed by signal " + std::to_string(result.exit_code - 128) +
                                           ", perhaps for memory; lower GEMMKIT_MAX_JOBS"
                                     : "")
          << "); the source and "
          << "the log were kept in " << dir.string() << " (kernel.cu, compile.log); reproduce with:\n  "
          << shell_quote(argv) << "\n"
          << head_lines(result.output, kLogLinesInMessage);
  throw CompileError(message.str(), argv, result.exit_code, result.output, source_path.string());
}

}  // namespace

void compile_module(const Toolchain& toolchain, const KernelSource& source, const std::string& work_dir) {
  run_nvcc(toolchain, source, work_dir, "kernel.so", "kernel.cu",
           [&](const std::string& in, const std::string& out) { return nvcc_command(toolchain, source, in, out); });
}

void compile_split(const Toolchain& toolchain, const KernelSource& source, SplitArtifact artifact,
                   const std::string& work_dir) {
  const bool cubin = artifact == SplitArtifact::cubin;
  run_nvcc(toolchain, source, work_dir, cubin ? "kernel.cubin" : "kernel.so", cubin ? "kernel.cu" : "host.cu",
           [&](const std::string& in, const std::string& out) {
             return split_command(toolchain, source, artifact, in, out);
           });
}

int max_parallel_compiles() {
  if (const std::optional<int> jobs = knobs::count("GEMMKIT_MAX_JOBS")) return *jobs;
  int jobs = available_cores();
  if (const long long memory = available_memory(); memory > 0) {
    jobs = static_cast<int>(std::min<long long>(jobs, memory / kBytesPerCompile));
  }
  return std::max(1, jobs);
}

}  // namespace gemmkit
