// bench/epilogue_section.cpp: the cost of fused epilogues on SM90 kernels: each activation and bias+gelu against
// the identity kernel of the same plan, in the same run (target: >= 0.97x identity throughput).
#include <cstdio>

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
  auto plan_for = [&](const Variant& v) {
    gk::Gemm plan = default_plan(t, ctx.cc);
    plan.set_activation(v.activation, 0.01);
    plan.set_bias(v.bias);
    return plan;
  };
  const std::vector<Shape> shapes = {{8192, 8192, 8192}, {4096, 4096, 4096}};
  // Every kernel first, in parallel.
  std::vector<gk::KernelSource> sources;
  for (const Shape& s : shapes) {
    for (const auto& v : variants) {
      gk::Gemm plan = plan_for(v);
      sources.push_back(gk::emit(planned_spec(plan, t, s, ctx.device)));
    }
  }
  gk::DiskCache().get_or_build_many(gk::Toolchain::discover(), sources);

  Table table{{"M x N x K", "epilogue", "TFLOP/s", "vs identity", "kernel"}, {}};
  Value rows = Value::array();
  for (const Shape& s : shapes) {
    Operands o(t, s);
    DeviceBuffer bias(static_cast<std::size_t>(s.n) * element_bytes(t));
    BENCH_CUDA(cudaMemset(bias.get(), 0, bias.bytes()));
    const auto bias_view = gk::TensorView::on_gpu(bias.get(), t, {s.n}, gk::Layout::RowMajor, ctx.device);
    double identity_ms = 0.0;
    for (const auto& v : variants) {
      std::printf("epilogue %s %s ...\n", s.text().c_str(), v.label.c_str());
      std::fflush(stdout);
      gk::Gemm plan = plan_for(v);
      const double ms = time_plan(ctx, plan, t, s, o, v.bias == gk::BiasMode::None ? nullptr : &bias_view);
      if (v.activation == gk::Activation::Identity && v.bias == gk::BiasMode::None) identity_ms = ms;
      const std::string kernel = planned_spec(plan, t, s, ctx.device).name();
      Value row = Value::object();
      row.set("shape", s.text());
      row.set("epilogue", v.label);
      row.set("tflops", tflops(s, ms));
      row.set("ratio_vs_identity", identity_ms > 0 ? identity_ms / ms : 0.0);
      row.set("kernel_name", kernel);
      rows.push_back(row);
      table.rows.push_back({s.text(), v.label, fixed(tflops(s, ms), 1),
                            identity_ms > 0 ? fixed(identity_ms / ms, 3) : "-", kernel});
    }
  }
  result.json.set("rows", rows);
  result.markdown = "## Fused epilogues on SM90 (f16, f32 accumulate; identity measured first in each shape)\n\n" +
                    table.markdown();
  return result;
}

}  // namespace bench
