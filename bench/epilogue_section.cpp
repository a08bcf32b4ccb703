// bench/epilogue_section.cpp: the cost of fused epilogues on SM90 kernels: each activation and bias+gelu against
// the identity kernel of the same plan, in the same run (target: >= 0.97x identity throughput). All variants of a
// shape are timed in interleaved rounds, so that none gets the cool GPU's boost clocks (the first version timed
// them one after another and read the identity kernel, timed first, 5-10 % fast).
#include <algorithm>
#include <cstdio>
#include <optional>

#include "bench.hpp"
#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"

namespace bench {

SectionResult epilogue_section(Context& ctx) {
  SectionResult result;
  const gk::DataType t = gk::DataType::f16;
  struct Variant {
    std::string label;
    gk::Activation activation;
    gk::BiasMode bias;
  };
  std::vector<Variant> variants = {{"identity", gk::Activation::Identity, gk::BiasMode::None}};  // the baseline first
  for (auto a : gk::Gemm::activations()) {
    if (a != gk::Activation::Identity) variants.push_back({std::string(gk::to_string(a)), a, gk::BiasMode::None});
  }
  variants.push_back({"bias(column)+gelu", gk::Activation::GELU, gk::BiasMode::PerColumn});
  // Each variant on the default configuration, and on two pingpong configurations, where one consumer warp group's
  // epilogue overlaps the other's mainloop (the candidates for activations whose math is not free).
  struct Config {
    std::string label;
    std::optional<gk::TileDescription> tile;
  };
  std::vector<Config> configs = {{"default", std::nullopt}};
  for (const auto& td : default_plan(t, ctx.cc).tile_descriptions()) {
    const auto cta = td.cta_tile();
    const bool pingpong = td.kernel_schedule == gk::KernelSchedule::TmaWarpSpecializedPingpong &&
                          td.epilogue_schedule == gk::EpilogueSchedule::TmaWarpSpecialized &&
                          td.tile_scheduler == gk::TileScheduler::Default && td.cluster_shape[0] == 2;
    if (pingpong && ((cta[0] == 128 && cta[1] == 128) || (cta[0] == 64 && cta[1] == 256))) {
      configs.push_back({"pingpong " + std::to_string(cta[0]) + "x" + std::to_string(cta[1]) + " c2x1", td});
    }
  }
  auto plan_for = [&](const Variant& v, const Config& c) {
    gk::Gemm plan = default_plan(t, ctx.cc);
    plan.set_activation(v.activation, 0.01);
    plan.set_bias(v.bias);
    if (c.tile) plan.set_tile_description(*c.tile);
    return plan;
  };
  const std::vector<Shape> shapes = {{8192, 8192, 8192}, {4096, 4096, 4096}};
  // Every kernel first, in parallel.
  std::vector<gk::KernelSource> sources;
  for (const Shape& s : shapes) {
    for (const auto& v : variants) {
      for (const auto& c : configs) {
        gk::Gemm plan = plan_for(v, c);
        sources.push_back(gk::emit(planned_spec(plan, t, s, ctx.device)));
      }
    }
  }
  gk::DiskCache().get_or_build_many(gk::Toolchain::discover(), sources);

  const int rounds = ctx.options.repeats;
  const double batch_ms = 50.0;
  Table table{{"M x N x K", "epilogue", "configuration", "TFLOP/s", "vs identity", "ratio range", "kernel"}, {}};
  Value rows = Value::array();
  for (const Shape& s : shapes) {
    Operands o(t, s);
    DeviceBuffer bias(static_cast<std::size_t>(s.n) * element_bytes(t));
    BENCH_CUDA(cudaMemset(bias.get(), 0, bias.bytes()));
    const auto bias_view = gk::TensorView::on_gpu(bias.get(), t, {s.n}, gk::Layout::RowMajor, ctx.device);
    struct Entry {
      const Variant* variant;
      const Config* config;
    };
    std::vector<Entry> entries;  // entries[0] = identity on the default configuration: the baseline
    std::vector<gk::Gemm> plans;
    for (const auto& c : configs) {
      for (const auto& v : variants) {
        entries.push_back({&v, &c});
        plans.push_back(plan_for(v, c));
      }
    }
    std::printf("epilogue %s: %zu kernels x %d interleaved rounds ...\n", s.text().c_str(), entries.size(), rounds);
    std::fflush(stdout);
    std::vector<std::function<void()>> calls;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const bool with_bias = entries[i].variant->bias != gk::BiasMode::None;
      calls.push_back(plan_call(ctx, plans[i], t, s, o, with_bias ? &bias_view : nullptr));
    }
    const auto ms = interleaved_ms(ctx.stream, calls, rounds, batch_ms, ctx.options.warmup_ms);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      // Per round: identity's time over this entry's, both measured within the same round.
      std::vector<double> ratios;
      for (int r = 0; r < rounds; ++r) ratios.push_back(ms[0][r] / ms[i][r]);
      const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
      const double ratio = median(ratios);
      const double tf = tflops(s, median(ms[i]));
      const std::string kernel = planned_spec(plans[i], t, s, ctx.device).name();
      Value row = Value::object();
      row.set("shape", s.text());
      row.set("epilogue", entries[i].variant->label);
      row.set("configuration", entries[i].config->label);
      row.set("tflops", tf);
      row.set("ratio_vs_identity", ratio);
      row.set("ratio_min", *low);
      row.set("ratio_max", *high);
      Value times = Value::array();
      for (double m : ms[i]) times.push_back(m);
      row.set("ms_per_round", times);
      row.set("kernel_name", kernel);
      rows.push_back(row);
      table.rows.push_back({s.text(), entries[i].variant->label, entries[i].config->label, fixed(tf, 1),
                            fixed(ratio, 3), fixed(*low, 3) + "-" + fixed(*high, 3), kernel});
    }
  }
  result.json.set("rounds", rounds);
  result.json.set("batch_ms", batch_ms);
  result.json.set("rows", rows);
  result.markdown = "## Fused epilogues on SM90 (f16, f32 accumulate, beta 0)\n\nVariants of a shape timed in " +
                    std::to_string(rounds) + " interleaved rounds of one >= " + fixed(batch_ms, 0) +
                    " ms batch each, after a warm-up; vs identity = median over rounds of the default "
                    "identity kernel's time / this kernel's time in the same round.\n\n" +
                    table.markdown();
  return result;
}

}  // namespace bench
