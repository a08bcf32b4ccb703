// tests/support/cli.hpp: running the gemmkit command line from a test, and the plan most tests start from.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "gemmkit/gemm.hpp"

namespace gemmkit::testing {

struct CliResult {
  int status;
  std::string out;  // stdout and stderr together
};

// Runs `gemmkit <arguments>`, with GEMMKIT_CACHE_DIR set to cache_dir when one is given.
inline CliResult run_cli(const std::string& arguments, const std::string& cache_dir = "") {
  const std::string env = cache_dir.empty() ? "" : "GEMMKIT_CACHE_DIR='" + cache_dir + "' ";
  FILE* pipe = popen((env + GEMMKIT_CLI_PATH + " " + arguments + " 2>&1").c_str(), "r");
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), out};
}

// The reference's basic plan: f16 operands, f32 accumulation, every operand row-major.
inline GemmOptions f16_row(int cc) {
  GemmOptions o;
  o.element = DataType::f16;
  o.layout = Layout::RowMajor;
  o.element_accumulator = DataType::f32;
  o.cc = cc;
  return o;
}

}  // namespace gemmkit::testing
