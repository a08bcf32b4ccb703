// bench/epilogue_section.cpp: the cost of fused epilogues on SM90 kernels: each activation and bias+gelu against
// the identity epilogue of the same plan, and the kernels that compile the epilogue in (CUTLASS's TMA epilogue)
// against the same epilogue taking the activation at launch (the plans' default) and against gemmkit's lean epilogue
// (one kernel for all of them), in the same run. All variants of a shape are timed in interleaved rounds, so that none
// gets the cool GPU's boost clocks (timed one after another, the first one read 5-10 % fast).
#include <algorithm>
#include <cstdio>
#include <optional>

#include "bench.hpp"
#include "gemmkit/jit.hpp"

namespace bench {

// The same plan on gemmkit's lean epilogue (one kernel for every epilogue, taken at launch): the tile run() picks for
// the shape, with the Lean epilogue schedule. nullopt where that tile has no such configuration.
std::optional<gk::Gemm> lean_plan(gk::Gemm plan, const Shape& s) {
  gk::TileDescription tile = planned_spec(plan, s).tile;
  if (tile.epilogue_schedule != gk::EpilogueSchedule::Auto) return std::nullopt;
  tile.kernel_schedule = tile.cta_tile()[0] >= 128 ? gk::KernelSchedule::TmaWarpSpecializedCooperative
                                                   : gk::KernelSchedule::TmaWarpSpecializedPingpong;
  tile.epilogue_schedule = gk::EpilogueSchedule::Lean;
  try {
    plan.set_tile_description(tile);
  } catch (const gk::ConfigError&) {
    return std::nullopt;
  }
  return plan;
}

namespace {

// The same plan with its activation taken at launch (CUTLASS's epilogue, one kernel for every activation); nullopt
// where the plan's kernel compiles it in anyway (identity).
std::optional<gk::Gemm> at_launch_plan(gk::Gemm plan, const Shape& s) {
  plan.set_activation_at_launch(true);
  if (!planned_spec(plan, s).activation_at_launch) return std::nullopt;
  return plan;
}

struct Variant {
  std::string label;
  gk::Activation activation;
  gk::BiasMode bias;
};

// Identity first (the baseline), then every other activation, then bias + gelu.
std::vector<Variant> variants() {
  std::vector<Variant> out = {{"identity", gk::Activation::Identity, gk::BiasMode::None}};
  for (auto a : gk::Gemm::activations()) {
    if (a != gk::Activation::Identity) out.push_back({std::string(gk::to_string(a)), a, gk::BiasMode::None});
  }
  out.push_back({"bias(column)+gelu", gk::Activation::GELU, gk::BiasMode::PerColumn});
  return out;
}

gk::Gemm plan_for(const Context& ctx, const Variant& v) {
  gk::Gemm plan = default_plan(gk::DataType::f16, ctx);
  plan.set_activation(v.activation, 0.01);
  plan.set_bias(v.bias);
  plan.set_activation_at_launch(false);  // the row's baseline: the activation compiled in
  return plan;
}

const std::vector<Shape> kShapes = {{8192, 8192, 8192}, {4096, 4096, 4096}};

}  // namespace

std::vector<gk::KernelSpec> epilogue_kernels(const Context& ctx) {
  // The plans' kernels with the epilogue compiled in (CUTLASS's), the same taking the activation at launch, and the
  // lean epilogue's (one kernel for them all).
  std::vector<gk::KernelSpec> specs;
  for (const Shape& s : kShapes) {
    for (const auto& v : variants()) {
      gk::Gemm plan = plan_for(ctx, v);
      specs.push_back(planned_spec(plan, s));
      if (std::optional<gk::Gemm> lean = lean_plan(plan_for(ctx, v), s)) {
        specs.push_back(planned_spec(*lean, s));
      }
      if (std::optional<gk::Gemm> at_launch = at_launch_plan(plan_for(ctx, v), s)) {
        specs.push_back(planned_spec(*at_launch, s));
      }
    }
  }
  return specs;
}

SectionResult epilogue_section(Context& ctx) {
  SectionResult result;
  const gk::DataType t = gk::DataType::f16;
  const std::vector<Variant> variants = bench::variants();
  auto plan_for = [&](const Variant& v) { return bench::plan_for(ctx, v); };
  const std::vector<Shape>& shapes = kShapes;
  gk::compile_many(epilogue_kernels(ctx));  // every kernel first, in parallel

  const int rounds = ctx.options.repeats;
  const double batch_ms = 50.0;
  Table table{{"M x N x K", "epilogue", "TFLOP/s", "vs identity", "ratio range", "at launch / compiled in",
               "lean TFLOP/s", "lean / compiled in", "kernel"},
              {}};
  Value rows = Value::array();
  for (const Shape& s : shapes) {
    std::printf("epilogue %s: %zu variants x %d interleaved rounds ...\n", s.text().c_str(), variants.size(), rounds);
    std::fflush(stdout);
    Operands o(t, s);
    DeviceBuffer bias(static_cast<std::size_t>(s.n) * element_bytes(t));
    BENCH_CUDA(cudaMemset(bias.get(), 0, bias.bytes()));
    const auto bias_view = gk::TensorView::on_gpu(bias.get(), t, {s.n}, gk::Layout::RowMajor, ctx.device);
    std::vector<gk::Gemm> plans;
    std::vector<std::optional<gk::Gemm>> lean, at_launch;
    for (const auto& v : variants) {
      plans.push_back(plan_for(v));
      lean.push_back(lean_plan(plan_for(v), s));
      at_launch.push_back(at_launch_plan(plan_for(v), s));
    }
    std::vector<std::function<void()>> calls;
    std::vector<int> lean_call(variants.size(), -1), at_launch_call(variants.size(), -1);
    auto add_call = [&](gk::Gemm& plan, std::size_t i) {
      calls.push_back(plan_call(ctx, plan, t, s, o, variants[i].bias == gk::BiasMode::None ? nullptr : &bias_view));
      return static_cast<int>(calls.size()) - 1;
    };
    for (std::size_t i = 0; i < variants.size(); ++i) add_call(plans[i], i);
    for (std::size_t i = 0; i < variants.size(); ++i) {
      if (lean[i]) lean_call[i] = add_call(*lean[i], i);
      if (at_launch[i]) at_launch_call[i] = add_call(*at_launch[i], i);
    }
    const auto ms = interleaved_ms(ctx.stream, calls, rounds, batch_ms, ctx.options.warmup_ms);
    for (std::size_t i = 0; i < variants.size(); ++i) {
      // Per round: identity's time over this variant's, both measured within the same round.
      std::vector<double> ratios;
      for (int r = 0; r < rounds; ++r) ratios.push_back(ms[0][r] / ms[i][r]);
      // Per round: this variant's default kernel's time over the other kernel's.
      auto vs_default = [&](int call) {
        std::vector<double> out;
        for (int r = 0; r < rounds; ++r) out.push_back(ms[i][r] / ms[static_cast<std::size_t>(call)][r]);
        return median(out);
      };
      const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
      const double ratio = median(ratios);
      const double tf = tflops(s, median(ms[i]));
      const std::string kernel = planned_spec(plans[i], s).name();
      Value row = Value::object();
      row["shape"] = s.text();
      row["epilogue"] = variants[i].label;
      row["tflops"] = tf;
      row["ratio_vs_identity"] = ratio;
      row["ratio_min"] = *low;
      row["ratio_max"] = *high;
      Value times = Value::array();
      for (double m : ms[i]) times.push_back(m);
      row["ms_per_round"] = times;
      row["kernel_name"] = kernel;
      std::string lean_tf = "-", lean_ratio = "-", at_launch_ratio = "-";
      if (lean_call[i] >= 0) {
        const double ltf = tflops(s, median(ms[static_cast<std::size_t>(lean_call[i])]));
        const double lean_vs_default = vs_default(lean_call[i]);
        row["lean_tflops"] = ltf;
        row["lean_vs_default"] = lean_vs_default;
        row["lean_kernel_name"] = planned_spec(*lean[i], s).name();
        lean_tf = fixed(ltf, 1);
        lean_ratio = fixed(lean_vs_default, 3);
      }
      if (at_launch_call[i] >= 0) {
        const double at_launch_vs_default = vs_default(at_launch_call[i]);
        row["at_launch_vs_default"] = at_launch_vs_default;
        row["at_launch_kernel_name"] = planned_spec(*at_launch[i], s).name();
        at_launch_ratio = fixed(at_launch_vs_default, 3);
      }
      rows.push_back(row);
      table.rows.push_back({s.text(), variants[i].label, fixed(tf, 1), fixed(ratio, 3),
                            fixed(*low, 3) + "-" + fixed(*high, 3), at_launch_ratio, lean_tf, lean_ratio, kernel});
    }
  }
  result.json["rounds"] = rounds;
  result.json["batch_ms"] = batch_ms;
  result.json["rows"] = rows;
  result.markdown =
      "## Fused epilogues on SM90 (f16, f32 accumulate, beta 0)\n\nVariants of a shape timed in " +
      std::to_string(rounds) + " interleaved rounds of one >= " + fixed(batch_ms, 0) +
      " ms batch each, after a warm-up; vs identity = median over rounds of identity's time / "
      "this variant's time in the same round, on the kernel that compiles the epilogue in. At launch: the "
      "same kernel taking its activation at launch (one kernel for every activation, the plans' "
      "default); at launch / compiled in = this row's time / that kernel's, per round. Lean: the same "
      "tile on gemmkit's lean epilogue (one kernel for every row, the epilogue taken at launch); lean / "
      "compiled in = this row's time / the lean kernel's, per round.\n\n" +
      table.markdown();
  return result;
}

}  // namespace bench
