// tests/support/cli.hpp: running the gemmkit command line from a test (and, through plan_options.hpp, the plans
// most tests start from).
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "gemmkit/gemm.hpp"
#include "jit/process.hpp"
#include "support/plan_options.hpp"  // f16_row, fp8_tn: the plans the CLI tests declare too

namespace gemmkit::testing {

struct CliResult {
  int status;
  std::string out;  // stdout and stderr together
};

// Runs `gemmkit <arguments>` (words separated by spaces), without compile progress, with GEMMKIT_CACHE_DIR set to
// cache_dir when one is given.
inline CliResult run_cli(const std::string& arguments, const std::string& cache_dir = "") {
  std::vector<std::string> argv = {GEMMKIT_CLI_PATH};
  std::istringstream words(arguments);
  for (std::string word; words >> word;) argv.push_back(word);
  ProcessOptions options;
  options.environment.push_back("GEMMKIT_PROGRESS=0");  // its lines would land in the output that tests parse
  if (!cache_dir.empty()) options.environment.push_back("GEMMKIT_CACHE_DIR=" + cache_dir);
  const ProcessResult result = run_process(argv, options);
  return {result.exit_code, result.output};
}

}  // namespace gemmkit::testing
