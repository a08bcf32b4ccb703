// tools/gemmkit/commands/run.cpp: gemmkit run: the plan run on the GPU on small-integer data, timed, and with
// --check compared with the float64 reference (--grouped: run_grouped.cpp, --conv: run_conv.cpp).
#include "commands/run.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "commands/commands.hpp"
#include "gemmkit/device.hpp"
#include "plan_options.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;

namespace gemmkit::cli {
namespace {

// gemmkit run: the problem, alpha and beta, repetitions, groups.
std::vector<OptionRow> run_table() {
  auto rows = problem_table();
  for (auto& row :
       std::vector<OptionRow>{{"alpha", "X", "D = alpha * A@B + beta * C", real_check(), "1"},
                              {"beta", "X", "", real_check(), "0"},
                              {"repeat", "N", "timed runs after the first", integer_check(1, 1000000), "10"},
                              {"groups", "G", "with --grouped: problems in one launch, M rows each drawn from [1, --m]",
                               integer_check(1, 1000000), "16"}}) {
    rows.push_back(std::move(row));
  }
  return rows;
}

int cmd_run(const Values& args, bool check, const Output& output) {
  using gk::verify::DeviceBuffer;
  using gk::verify::HostMatrix;
  const bool grouped = false;
  if (args.given("conv")) {
    const auto owned = plan_to_run(args, grouped);
    return run_conv(dynamic_cast<gk::Conv2d&>(*owned), args, check, output);
  }
  if (auto scaling = args.enumerator<gk::BlockScaling>("block-scaling");
      scaling && *scaling != gk::BlockScaling::None) {
    throw gk::ConfigError(
        "--block-scaling: gemmkit run has no block scales to give the kernel; run a block-scaled plan from C++ "
        "(RunOptions::scale_a / scale_b) or Python (run(scale_a=..., scale_b=...)), or inspect and build it here with "
        "plan, tiles and compile.");
  }
  const Problem r = run_problem(args);
  const auto owned = plan_to_run(args, grouped);
  gk::Gemm& plan = dynamic_cast<gk::Gemm&>(*owned);
  HostMatrix A(plan.element_a(), r.m, r.k, plan.layout_a(), r.batch);
  HostMatrix B(plan.element_b(), r.k, r.n, plan.layout_b(), r.batch);
  HostMatrix C(plan.element_c(), r.m, r.n, plan.layout_c(), r.batch);
  HostMatrix D(plan.element_d(), r.m, r.n, plan.layout_c(), r.batch);
  // Small integers: every product and sum is exact in the accumulator, so only D's rounding remains. A 16-bit
  // accumulator holds integers exactly up to 2048 only: there A and B take -1, 0 and 1 (sums of K terms then stay
  // within a few sqrt(K), far below 2048 for any K this command takes in practice).
  const int ab = gk::bits_of(plan.element_accumulator()) <= 16 ? 1 : 4;
  A.fill_integers(1, -ab, ab);
  B.fill_integers(2, -ab, ab);
  C.fill_integers(3, -4, 4);
  const bool per_row = plan.bias() == gk::BiasMode::PerRow;
  HostMatrix bias(plan.element_c(), 1, per_row ? r.m : r.n, gk::Layout::RowMajor);
  bias.fill_integers(4, -4, 4);
  const DeviceBuffer dA(A), dB(B), dC(C), dD(D), dBias(bias);
  const gk::TensorView vA = dA.view_like(A), vB = dB.view_like(B), vC = dC.view_like(C), vD = dD.view_like(D);
  const gk::TensorView vBias = dBias.view_like(bias);
  gk::RunOptions options;
  options.bias = plan.bias() == gk::BiasMode::None ? nullptr : &vBias;
  const auto run = [&] { plan.run(vA, vB, &vC, vD, r.alpha, r.beta, options); };
  const double first_seconds = first_run_seconds(run);
  options.sync = false;
  const double seconds = seconds_per_run(r.repeat, run);
  const double tflops = 2.0 * r.m * r.n * r.k * r.batch / seconds / 1e12;
  dD.copy_to(D);
  Json out = {{"kernel_name", plan.kernel_name()},
              {"m", r.m},
              {"n", r.n},
              {"k", r.k},
              {"batch", r.batch},
              {"first_run_seconds", first_seconds},
              {"seconds_per_run", seconds},
              {"tflops", tflops}};
  std::string text = "kernel: " + plan.kernel_name() + "\nfirst run (compile or load): " + fixed(first_seconds, 1) +
                     " s\n" + fixed(tflops, 1) + " TFLOP/s\n";
  if (!check) {
    output.print(out, text);
    return 0;
  }
  const std::int64_t samples = r.m * r.n * r.batch <= (1 << 18) ? 0 : 4096;
  const gk::verify::Epilogue epilogue{plan.activation(), plan.activation_parameter(),
                                      options.bias != nullptr ? &bias : nullptr, plan.bias()};
  const auto cmp = gk::verify::compare_with_reference(A, B, &C, D, r.alpha, r.beta, samples, 1, epilogue);
  const bool ok = add_check(cmp, plan.element_d(), true, out, text);
  output.print(out, text);
  return ok ? 0 : 1;
}

}  // namespace

double first_run_seconds(const std::function<void()>& run) {
  const auto t0 = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double seconds_per_run(std::int64_t repeat, const std::function<void()>& run) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (std::int64_t i = 0; i < repeat; ++i) run();
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, start, stop);
  return ms / 1e3 / static_cast<double>(repeat);
}

double check_tolerance(DataType element) {
  return bits_of(element) <= 16 ? 1e-2 : 1e-6;
}

bool add_check(const verify::Comparison& cmp, DataType element, bool rel_error, Json& out, std::string& text) {
  const bool ok = cmp.max_rel_error <= check_tolerance(element);
  out["checked"] = cmp.checked;
  out["max_abs_error"] = cmp.max_abs_error;
  if (rel_error) out["max_rel_error"] = cmp.max_rel_error;
  out["check"] = ok ? "pass" : "fail";
  text += "check: " + std::string(ok ? "pass" : "FAIL") + " (max abs error " + std::to_string(cmp.max_abs_error) +
          " over " + std::to_string(cmp.checked) + " elements)\n";
  return ok;
}

Command add_run(CLI::App& gemmkit, Shared& shared) {
  CLI::App* app = add_command(gemmkit, "run", "run the plan on the GPU on small-integer data", shared);
  add_plan_options(*app, shared, false);
  shared.values.add_to(*app, run_table());
  auto check = std::make_shared<bool>(false);
  add_flag(*app, "--check", *check, "compare D with a float64 reference");
  return {app, [&shared, check] {
            return shared.grouped ? run_grouped(shared.values, *check, shared.output)
                                  : cmd_run(shared.values, *check, shared.output);
          }};
}

}  // namespace gemmkit::cli
