// tools/gemmkit/commands/compile.cpp: gemmkit compile: the plan's kernel generated and compiled through the on-disk
// cache.
#include "commands/commands.hpp"
#include "gemmkit/jit.hpp"
#include "plan_options.hpp"

namespace gk = gemmkit;

namespace gemmkit::cli {
namespace {

int cmd_compile(const Values& args, bool grouped, const Output& output) {
  const auto owned = make_plan(args, grouped);
  gk::Plan& plan = *owned;
  const std::optional<gk::KernelSpec> sized = sized_spec(plan, args);
  const gk::CompiledKernel built = sized ? gk::build_kernel(*sized) : plan.compile();
  output.print(built, "kernel: " + built.kernel_name + "\ncache:  " +
                          (built.cache_hit ? "hit" : "miss (compiled in " + fixed(built.build_seconds, 1) + " s)") +
                          "\nmodule: " + built.module_path + "\n");
  return 0;
}

}  // namespace

Command add_compile(CLI::App& gemmkit, Shared& shared) {
  CLI::App* app =
      add_command(gemmkit, "compile", "generate and compile the plan's kernel (through the on-disk cache)", shared);
  add_plan_options(*app, shared, true);
  return {app, [&shared] { return cmd_compile(shared.values, shared.grouped, shared.output); }};
}

}  // namespace gemmkit::cli
