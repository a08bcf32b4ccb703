// tools/gemmkit/commands/run_grouped.cpp: gemmkit run --grouped: a GroupedGemm of --groups problems, timed and checked.
#include "commands/run.hpp"

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "command.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "plan_options.hpp"
#include "verify/device_buffer.hpp"
#include "verify/host_matrix.hpp"

namespace gk = gemmkit;

namespace gemmkit::cli {

int run_grouped(const Values& args, bool check, const Output& output) {
  using gk::verify::DeviceBuffer;
  using gk::verify::HostMatrix;
  const Problem r = run_problem(args);
  if (r.batch != 1) throw UsageError("--batch: a grouped run takes one matrix per group; use --groups.");
  const std::int64_t groups = *args.integer("groups");
  if (groups * r.m * std::max(r.n, r.k) > kInt32Max) {
    throw UsageError("--groups, --m, --n, --k: the groups would hold more than 2147483647 (2^31-1) elements.");
  }
  const auto owned = plan_to_run(args, true);
  auto& plan = dynamic_cast<gk::GroupedGemm&>(*owned);
  std::mt19937_64 random(2023);
  std::vector<HostMatrix> A, B, C, D;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<gk::TensorView> a, b, c, d;
  double flops = 0;
  const int ab = gk::bits_of(plan.element_accumulator()) <= 16 ? 1 : 4;  // see cmd_run in run.cpp
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t m = 1 + static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(r.m));
    A.emplace_back(plan.element_a(), m, r.k, plan.layout_a());
    B.emplace_back(plan.element_b(), r.k, r.n, plan.layout_b());
    C.emplace_back(plan.element_c(), m, r.n, plan.layout_c());
    D.emplace_back(plan.element_d(), m, r.n, plan.layout_c());
    A.back().fill_integers(4 * g, -ab, ab);
    B.back().fill_integers(4 * g + 1, -ab, ab);
    C.back().fill_integers(4 * g + 2, -4, 4);
    flops += 2.0 * m * r.n * r.k;
  }
  for (auto* list : {&A, &B, &C, &D}) {
    auto& views = list == &A ? a : list == &B ? b : list == &C ? c : d;
    for (const HostMatrix& host : *list) {
      buffers.push_back(std::make_unique<DeviceBuffer>(host));
      views.push_back(buffers.back()->view_like(host));
    }
  }
  const double first_seconds = first_run_seconds([&] { plan.run(a, b, c, d, r.alpha, r.beta); });  // compile or load
  gk::RunOptions options;
  options.sync = false;
  const double seconds = seconds_per_run(r.repeat, [&] { plan.run(a, b, c, d, r.alpha, r.beta, options); });
  Json out = {{"kernel_name", plan.kernel_name()},
              {"groups", groups},
              {"m_max", r.m},
              {"n", r.n},
              {"k", r.k},
              {"first_run_seconds", first_seconds},
              {"seconds_per_run", seconds},
              {"tflops", flops / seconds / 1e12}};
  std::string text = "kernel: " + plan.kernel_name() + "\n" + std::to_string(groups) +
                     " groups; first run (compile or load): " + fixed(first_seconds, 1) + " s\n" +
                     fixed(flops / seconds / 1e12, 1) + " TFLOP/s, " + fixed(seconds * 1e6, 1) + " us per run\n";
  if (!check) {
    output.print(out, text);
    return 0;
  }
  std::int64_t wrong = 0;
  for (std::size_t g = 0; g < D.size(); ++g) {
    buffers[3 * D.size() + g]->copy_to(D[g]);
    const std::int64_t samples = D[g].rows() * D[g].cols() <= (1 << 14) ? 0 : 512;
    const gk::verify::Epilogue epilogue{plan.activation(), plan.activation_parameter(), nullptr, gk::BiasMode::None};
    const auto cmp = gk::verify::compare_with_reference(A[g], B[g], &C[g], D[g], r.alpha, r.beta, samples, g, epilogue);
    wrong += cmp.max_rel_error > check_tolerance(plan.element_d()) ? 1 : 0;
  }
  out["groups_wrong"] = wrong;
  out["check"] = wrong == 0 ? "pass" : "fail";
  text += "check: " + std::string(wrong == 0 ? "pass" : "FAIL") + " (" + std::to_string(wrong) + " of " +
          std::to_string(groups) + " groups differ from the float64 reference)\n";
  output.print(out, text);
  return wrong == 0 ? 0 : 1;
}

}  // namespace gemmkit::cli
