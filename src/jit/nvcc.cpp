// src/jit/nvcc.cpp: the nvcc command line, one nvcc pass per kernel module, and the parallel-job limit.
#include <sched.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
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

std::vector<std::string> nvcc_command(const Toolchain& toolchain, const KernelSource& source,
                                      const std::string& source_path, const std::string& output_path) {
  return {toolchain.nvcc, "-std=c++17", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr", "-Xcompiler=-fPIC",
          "-Xcompiler=-O2",
          // CUTLASS's template statics must stay private to each module, or two modules share device caches.
          "-Xcompiler=-fvisibility=hidden", "-Xcompiler=-fno-gnu-unique", "-shared", "-cudart", "shared", "-Xcudafe",
          "--diag_suppress=esa_on_defaulted_function_ignored", gencode_flag(source.arch_flag),
          "-I" + toolchain.cutlass_root + "/include", "-I" + toolchain.cutlass_root + "/tools/util/include",
          "-I" + toolchain.device_include_dir, source_path, "-o", output_path};
}

void compile_module(const Toolchain& toolchain, const KernelSource& source, const std::string& work_dir) {
  const fs::path dir(work_dir);
  fs::create_directories(dir);
  const fs::path source_path = dir / "kernel.cu";
  const fs::path module_path = dir / "kernel.so";
  write_file(source_path, source.text);

  std::vector<std::string> argv = nvcc_command(toolchain, source, source_path.string(), module_path.string());
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
          << result.exit_code << (result.exit_code == 0 ? ", but it wrote no kernel.so" : "")
          << (result.exit_code > 128 ? ": killed by signal " + std::to_string(result.exit_code - 128) +
                                           ", perhaps for memory; lower GEMMKIT_MAX_JOBS"
                                     : "")
          << "); the source and "
          << "the log were kept in " << work_dir << " (kernel.cu, compile.log); reproduce with:\n  "
          << shell_quote(argv) << "\n"
          << head_lines(result.output, kLogLinesInMessage);
  throw CompileError(message.str(), argv, result.exit_code, result.output, source_path.string());
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
