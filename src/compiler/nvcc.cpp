// src/compiler/nvcc.cpp: the nvcc command line, one nvcc pass per kernel module, and the parallel-job limit.
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "compiler/process.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "util/knobs.hpp"

namespace fs = std::filesystem;

namespace gemmkit {
namespace {

constexpr long long kBytesPerCompile = 4LL << 30;  // a CUTLASS SM90 translation unit peaks near 4 GiB in cicc/ptxas
constexpr int kLogLinesInMessage = 40;

bool verbose() {
  const std::string v = knobs::value("GEMMKIT_VERBOSE");
  return !v.empty() && v != "0";
}

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
  return {toolchain.nvcc,
          "-std=c++17",
          "-O3",
          "-DNDEBUG",
          "--expt-relaxed-constexpr",
          "-Xcompiler=-fPIC",
          "-Xcompiler=-O2",
          // CUTLASS's template statics must stay private to each module, or two modules share device caches.
          "-Xcompiler=-fvisibility=hidden",
          "-Xcompiler=-fno-gnu-unique",
          "-shared",
          "-cudart",
          "shared",
          "-Xcudafe",
          "--diag_suppress=esa_on_defaulted_function_ignored",
          gencode_flag(source.arch_flag),
          "-I" + toolchain.cutlass_root + "/include",
          "-I" + toolchain.cutlass_root + "/tools/util/include",
          "-I" + toolchain.device_include_dir,
          source_path,
          "-o",
          output_path};
}

void compile_module(const Toolchain& toolchain, const KernelSource& source, const std::string& work_dir) {
  const fs::path dir(work_dir);
  fs::create_directories(dir);
  const fs::path source_path = dir / "kernel.cu";
  const fs::path module_path = dir / "kernel.so";
  write_file(source_path, source.text);

  const std::vector<std::string> argv = nvcc_command(toolchain, source, source_path.string(), module_path.string());
  if (verbose()) std::cerr << "gemmkit: " << shell_quote(argv) << std::endl;
  const ProcessResult result = run_process(argv);

  std::error_code ec;
  if (result.exit_code == 0 && fs::is_regular_file(module_path, ec)) return;

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
  if (const std::string jobs = knobs::value("GEMMKIT_MAX_JOBS"); !jobs.empty()) {
    char* end = nullptr;
    const long value = std::strtol(jobs.c_str(), &end, 10);
    if (*end != '\0' || value < 1 || value > 4096) {
      throw ConfigError(std::string("GEMMKIT_MAX_JOBS='") + jobs +
                        "' is not a positive integer; unset it or set it to the number of parallel nvcc jobs, e.g. 4");
    }
    return static_cast<int>(value);
  }
  int jobs = available_cores();
  if (const long long memory = available_memory(); memory > 0) {
    jobs = static_cast<int>(std::min<long long>(jobs, memory / kBytesPerCompile));
  }
  return std::max(1, jobs);
}

}  // namespace gemmkit
