// tools/gemmkit/commands/plan.cpp: gemmkit plan: the kernel a plan picks (for a problem, the one run() takes, and how
// run() passes it).
#include "commands/commands.hpp"
#include "gemmkit/codegen.hpp"
#include "plan_options.hpp"

namespace gk = gemmkit;

namespace gemmkit::cli {
namespace {

int cmd_plan(const Values& args, bool grouped, bool print_source, const Output& output) {
  const auto owned = make_plan(args, grouped);
  gk::Plan& plan = *owned;
  const gk::KernelSpec spec = sized_spec(plan, args).value_or(plan.spec());
  Json out = spec;
  std::string text = "kernel: " + spec.name() + "\ncc " + std::to_string(spec.cc) + ", " +
                     std::string(gk::to_string(spec.opclass)) + ", " + std::string(gk::to_string(spec.family)) +
                     "\ntile:\n" + spec.tile.to_string() + "\n";
  if (const auto e = gemm_extents(args)) {  // a GEMM's problem: also what run() passes that kernel
    gk::Gemm& gemm = gemm_plan(plan);
    const auto [a, b, d] = gemm.stand_in_tensors(e->m, e->n, e->k, e->batch);
    const gk::KSplit split = gemm.k_split_for(a, b, nullptr, d);
    const int swizzle = gemm.max_swizzle_for(a, b, nullptr, d);
    out["run"] = {
        {"decomposition", gk::to_string(split.mode)}, {"splits", split.splits}, {"max_swizzle_size", swizzle}};
    text += "run(): " + std::string(gk::to_string(split.mode)) +
            (split.splits > 1 ? " into " + std::to_string(split.splits) + " slices" : std::string()) +
            (swizzle > 0 ? ", scheduler swizzle " + std::to_string(swizzle) : std::string()) + "\n";
  }
  if (print_source) {
    const std::string source = gk::render(spec).text;
    out["source"] = source;
    text += "\n" + source;
  }
  output.print(out, text);
  return 0;
}

}  // namespace

Command add_plan(CLI::App& gemmkit, Shared& shared) {
  CLI::App* app = add_command(gemmkit, "plan", "show the kernel a plan picks", shared);
  add_plan_options(*app, shared, true);
  auto print_source = std::make_shared<bool>(false);
  add_flag(*app, "--print-source", *print_source, "also print the generated .cu");
  return {app,
          [&shared, print_source] { return cmd_plan(shared.values, shared.grouped, *print_source, shared.output); }};
}

}  // namespace gemmkit::cli
