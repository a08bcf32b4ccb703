// examples/basic_gemm.cpp: the reference's basic GEMM walk-through in C++ (also `gemmkit demo`).
// Plan an fp16 GEMM, show its kernel, compile it, run it on small-integer data and check it exactly, switch to
// SIMT, reuse the kernel on a large problem, pick a configuration, try Stream-K, and see a bad one rejected.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "cc_option.hpp"
#include "gemmkit/cache.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "verify/host_matrix.hpp"
#include "verify/walkthrough.hpp"

namespace gk = gemmkit;
using gk::verify::HostMatrix;

namespace {

struct Walkthrough {
  bool json;
  nlohmann::ordered_json report = nlohmann::ordered_json::object();
  void say(const std::string& line) {
    if (!json) std::cout << line << "\n";
  }
};

// Runs plan on host matrices (staged through the GPU) and compares D with a float64 reference.
bool run_and_check(Walkthrough& w, gk::Gemm& plan, long m, long n, long k, double beta, const std::string& label) {
  HostMatrix A(plan.element_a(), m, k, plan.layout_a()), B(plan.element_b(), k, n, plan.layout_b());
  HostMatrix C(plan.element_c(), m, n, plan.layout_c()), D(plan.element_d(), m, n, plan.layout_c());
  // Values ceil(uniform(-4, 4)): integers in [-3, 4], exact in fp16 products and fp32 sums.
  A.fill_integers(2023, -3, 4);
  B.fill_integers(2024, -3, 4);
  C.fill_integers(2025, -3, 4);
  const auto a = A.view(), b = B.view(), c = C.view(), d = D.view();
  const int builds_before = gk::cache_counters().builds;
  plan.run(a, b, &c, d, 1.0, beta);
  const bool compiled = gk::cache_counters().builds > builds_before;
  const long samples = m * n <= 128 * 128 ? 0 : 4096;
  const auto cmp = gk::verify::compare_with_reference(A, B, &C, D, 1.0, beta, samples);
  const bool exact = cmp.max_abs_error == 0.0;
  w.say("  " + label + ": " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
        " beta=" + std::to_string(beta) + " -> " + (exact ? "D equals alpha*A@B + beta*C exactly" : "MISMATCH") + " (" +
        std::to_string(cmp.checked) + " elements checked, " + (compiled ? "compiled" : "no compile") + ")");
  nlohmann::ordered_json step = nlohmann::ordered_json::object();
  step["kernel_name"] = plan.kernel_name();
  step["exact"] = exact;
  step["compiled"] = compiled;
  w.report[label] = step;
  return exact;
}

}  // namespace

int basic_gemm_walkthrough(bool json, std::optional<int> cc) {
  Walkthrough w{json};
  const bool has_gpu = gk::cuda_device_count() > 0;
  gk::GemmOptions options;
  options.element = gk::DataType::f16;
  options.layout = gk::Layout::RowMajor;
  options.element_accumulator = gk::DataType::f32;
  options.cc = cc;
  if (!has_gpu && !cc) options.cc = 90;  // no GPU to ask: plan for the H100/H200 generation
  gk::Gemm plan(options);

  w.say("1. Plan: Gemm(element=f16, layout=RowMajor, element_accumulator=f32) for SM" + std::to_string(plan.cc()));
  w.say("   opclass: " + std::string(gk::to_string(plan.opclass())));
  w.say("   kernel:  " + plan.kernel_name());
  w.report["kernel_name"] = plan.kernel_name();
  w.report["cc"] = plan.cc();

  const auto built = plan.compile();
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", built.build_seconds);
  w.say("2. Compile: " + std::string(built.cache_hit ? "cache hit" : "compiled in " + std::string(seconds) + " s"));
  w.say("   cached at " + built.module_path);
  w.report["module_path"] = built.module_path;
  w.report["cache"] = built.cache_hit ? "hit" : "miss";

  if (!has_gpu) {
    w.say("3. Run: skipped. Running needs a CUDA device and none is visible on this machine; planning, emitting and");
    w.say("   compiling worked. Run `gemmkit demo` on a machine with an SM80 or SM90 GPU to run and check the kernel.");
    w.report["ran"] = false;
    if (json) std::cout << w.report.dump(2) << "\n";
    return 0;
  }
  w.report["ran"] = true;
  bool ok = true;
  w.say("3. Run on host buffers (staged through the GPU):");
  ok &= run_and_check(w, plan, 128, 128, 128, 0.0, "tensorop_128");

  w.say("4. Reuse the compiled kernel on a larger problem with beta = 2:");
  ok &= run_and_check(w, plan, 2400, 3232, 4096, 2.0, "tensorop_2400x3232x4096");

  gk::Gemm simt_plan(options);
  simt_plan.set_opclass(gk::OpClass::Simt);
  w.say("5. opclass = Simt -> " + simt_plan.kernel_name());
  ok &= run_and_check(w, simt_plan, 128, 128, 128, 0.0, "simt_128");

  const auto tiles = plan.tile_descriptions();
  w.say("6. " + std::to_string(tiles.size()) + " valid configurations; compiling and running entry 1:");
  w.say(tiles.at(1).to_string());
  plan.compile(tiles.at(1));
  ok &= run_and_check(w, plan, 128, 128, 128, 1.0, "tile_1");

  w.say("7. swizzle = Stream-K:");
  plan.set_swizzling_functor(gk::Swizzle::StreamK);
  w.say("   kernel: " + plan.kernel_name());
  ok &= run_and_check(w, plan, 1024, 1024, 8192, 1.0, "stream_k");

  w.say("8. A configuration with 8 stages of a 256x128x64 tile is rejected before compiling:");
  gk::TileDescription too_deep = tiles.front();
  too_deep.threadblock_shape = {256 * too_deep.cluster_shape[0], 128 * too_deep.cluster_shape[1], 64};
  too_deep.stages = 8;
  too_deep.kernel_schedule = gk::KernelSchedule::TmaWarpSpecializedCooperative;
  too_deep.epilogue_schedule = gk::EpilogueSchedule::TmaWarpSpecializedCooperative;
  try {
    plan.compile(too_deep);
    w.say("   NOT rejected (unexpected)");
    ok = false;
  } catch (const gk::ConfigError& e) {
    w.say(std::string("   ConfigError: ") + e.what());
    w.report["rejected_8_stages"] = e.what();
  }
  w.report["all_exact"] = ok;
  if (json) std::cout << w.report.dump(2) << "\n";
  return ok ? 0 : 1;
}

#ifndef GEMMKIT_NO_EXAMPLE_MAIN
int main(int argc, char** argv) {
  const std::optional<int> cc = cc_option(argc, argv);
  try {
    return basic_gemm_walkthrough(false, cc);
  } catch (const gk::Error& e) {
    std::cerr << "basic_gemm: " << e.what() << "\n";
    return 1;
  }
}
#endif
