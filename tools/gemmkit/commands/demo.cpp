// tools/gemmkit/commands/demo.cpp: gemmkit demo: the basic GEMM walk-through of examples/basic_gemm.cpp.
#include "commands/commands.hpp"
#include "verify/walkthrough.hpp"

namespace gemmkit::cli {

Command add_demo(CLI::App& gemmkit, Shared& shared) {
  CLI::App* app = add_command(gemmkit, "demo", "the basic GEMM walk-through (plan, compile, run, check)", shared);
  return {app, [&shared] { return basic_gemm_walkthrough(shared.output.json); }};
}

}  // namespace gemmkit::cli
