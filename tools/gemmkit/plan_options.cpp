// tools/gemmkit/plan_options.cpp: the shared options made into a plan, a problem and the kernel for it.
#include "plan_options.hpp"

#include <cuda_runtime_api.h>

#include <tuple>
#include <utility>

#include "gemmkit/device.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "messages.hpp"

namespace gk = gemmkit;

namespace gemmkit::cli {
namespace {

// Runs one of the plan's setters; its ConfigError names the option that asked for the change.
template <class Set>
void apply(const Values& args, const std::string& name, Set set) {
  try {
    set();
  } catch (const gk::ConfigError& e) {
    throw gk::ConfigError("--" + name + " " + *args.text(name) + ": " + e.what());
  }
}

bool conv_sizes_given(const Values& args) {
  return args.given("batch") || std::any_of(conv_size_names().begin(), conv_size_names().end(),
                                            [&](const std::string& name) { return args.given(name); });
}

// The kernel a Conv2d plan runs for the options' problem (nothing runs, no GPU needed: the views are never read).
gk::KernelSpec conv_spec_for(gk::Conv2d& plan, const Values& args) {
  const auto shape = conv_shape(args);
  gk::Conv2d::output_size(shape.input(), shape.filter(), shape.geometry);  // its ConfigError first
  const gk::ConvKind kind = plan.kind();
  // An aligned address that is never dereferenced: spec_for checks addresses for alignment only.
  void* const address = reinterpret_cast<void*>(std::uintptr_t{1} << 20);
  auto view = [&](gk::DataType type, const gk::verify::Extent4& e) {
    gk::TensorView v =
        gk::TensorView::strided(address, type, {e[0], e[1], e[2], e[3]}, {e[1] * e[2] * e[3], e[2] * e[3], e[3], 1});
    return v;
  };
  const gk::TensorView a = view(plan.element_a(), shape.a(kind)), b = view(plan.element_b(), shape.b(kind)),
                       d = view(plan.element_d(), shape.d(kind));
  return plan.spec_for(a, b, nullptr, d, shape.geometry);
}

}  // namespace

std::unique_ptr<gk::Plan> make_plan(const Values& args, bool grouped,
                                    const std::function<void(gk::GemmOptions&)>& adjust) {
  gk::GemmOptions o;
  o.element = args.enumerator<gk::DataType>("element");
  o.element_a = args.enumerator<gk::DataType>("element-a");
  o.element_b = args.enumerator<gk::DataType>("element-b");
  o.element_c = args.enumerator<gk::DataType>("element-c");
  o.element_d = args.enumerator<gk::DataType>("element-d");
  o.element_accumulator = args.enumerator<gk::DataType>("element-accumulator");
  o.layout = args.enumerator<gk::Layout>("layout");
  o.layout_a = args.enumerator<gk::Layout>("layout-a");
  o.layout_b = args.enumerator<gk::Layout>("layout-b");
  o.layout_c = args.enumerator<gk::Layout>("layout-c");
  if (auto cc = args.integer("cc")) o.cc = static_cast<int>(*cc);
  if (auto kernel_cc = args.integer("kernel-cc")) o.kernel_cc = static_cast<int>(*kernel_cc);
  if (adjust) adjust(o);
  std::unique_ptr<gk::Plan> owned;
  if (auto kind = args.enumerator<gk::ConvKind>("conv")) {
    if (grouped) throw UsageError("--conv and --grouped: a plan is one or the other.");
    gk::Conv2dOptions c;
    c.kind = *kind;
    c.element = o.element;
    c.element_a = o.element_a;
    c.element_b = o.element_b;
    c.element_c = o.element_c;
    c.element_d = o.element_d;
    c.element_accumulator = o.element_accumulator;
    c.cc = o.cc;
    c.kernel_cc = o.kernel_cc;
    auto conv = std::make_unique<gk::Conv2d>(c);
    if (auto algorithm = args.enumerator<gk::IteratorAlgorithm>("iterator-algorithm")) {
      apply(args, "iterator-algorithm", [&] { conv->set_iterator_algorithm(*algorithm); });
    }
    const auto split_mode = args.enumerator<gk::SplitKMode>("split-k-mode");
    const auto slices = args.integer("split-k-slices");
    if (split_mode || slices) {
      apply(args, split_mode ? "split-k-mode" : "split-k-slices", [&] {
        conv->set_split_k(split_mode.value_or(gk::SplitKMode::Serial), static_cast<int>(slices.value_or(0)));
      });
    }
    owned = std::move(conv);
  } else {
    owned = grouped ? std::unique_ptr<gk::Plan>(std::make_unique<gk::GroupedGemm>(o)) : std::make_unique<gk::Gemm>(o);
  }
  gk::Plan& plan = *owned;
  // The epilogue vectors, scheduler and split-K settings of one GEMM: a grouped or conv plan has none of them.
  auto* gemm = dynamic_cast<gk::Gemm*>(owned.get());
  auto gemm_only = [&](const char* name) -> gk::Gemm& {
    if (gemm == nullptr) {
      throw gk::ConfigError(std::string("--") + name + " applies to a GEMM plan, not to a " +
                            (grouped ? "--grouped" : "--conv") + " one; leave it out.");
    }
    return *gemm;
  };
  if (auto opclass = args.enumerator<gk::OpClass>("opclass")) {
    apply(args, "opclass", [&] { plan.set_opclass(*opclass); });
  }
  if (auto math = args.enumerator<gk::MathOperation>("math-operation")) {
    apply(args, "math-operation", [&] { plan.set_math_operation(*math); });
  }
  if (auto swizzle = args.enumerator<gk::Swizzle>("swizzle")) {
    apply(args, "swizzle", [&] { plan.set_swizzling_functor(*swizzle); });
  }
  if (auto activation = args.enumerator<gk::Activation>("activation")) {
    const auto slope = args.real("activation-parameter");
    apply(args, "activation",
          [&] { slope ? plan.set_activation(*activation, *slope) : plan.set_activation(*activation); });
  }
  if (auto bias = args.enumerator<gk::BiasMode>("bias"))
    apply(args, "bias", [&] { gemm_only("bias").set_bias(*bias); });
  if (auto at_launch = args.integer("activation-at-launch")) {
    apply(args, "activation-at-launch",
          [&] { gemm_only("activation-at-launch").set_activation_at_launch(*at_launch == 1); });
  }
  if (auto scaling = args.enumerator<gk::BlockScaling>("block-scaling")) {
    // GEMM and grouped plans take block scales; a conv plan has none.
    auto* grouped_plan = dynamic_cast<gk::GroupedGemm*>(owned.get());
    apply(args, "block-scaling", [&] {
      grouped_plan ? grouped_plan->set_block_scaling(*scaling) : gemm_only("block-scaling").set_block_scaling(*scaling);
    });
  }
  if (auto order = args.enumerator<gk::RasterOrder>("raster-order")) {
    apply(args, "raster-order", [&] { gemm_only("raster-order").set_raster_order(*order); });
  }
  if (auto size = args.integer("max-swizzle-size")) {
    apply(args, "max-swizzle-size",
          [&] { gemm_only("max-swizzle-size").set_max_swizzle_size(static_cast<int>(*size)); });
  }
  if (auto mode = args.enumerator<gk::Decomposition>("decomposition")) {
    apply(args, "decomposition", [&] { gemm_only("decomposition").set_decomposition(*mode); });
  }
  if (auto mode = args.enumerator<gk::ReductionMode>("reduction-mode")) {
    apply(args, "reduction-mode", [&] { gemm_only("reduction-mode").set_reduction_mode(*mode); });
  }
  if (auto index = args.integer("tile")) {
    const auto tiles = plan.tile_descriptions();
    if (*index >= static_cast<std::int64_t>(tiles.size())) {
      throw gk::ConfigError("--tile " + std::to_string(*index) + " is out of range: the plan has " +
                            std::to_string(tiles.size()) + " configurations, 0 to " + std::to_string(tiles.size() - 1) +
                            " (see gemmkit tiles).");
    }
    apply(args, "tile", [&] { plan.set_tile_description(tiles[static_cast<std::size_t>(*index)]); });
  }
  const bool conv = args.enumerator<gk::ConvKind>("conv").has_value();
  if (auto slices = args.integer("split-k-slices"); slices && !conv) {
    apply(args, "split-k-slices", [&] { gemm_only("split-k-slices").set_split_k_slices(static_cast<int>(*slices)); });
  }
  return owned;
}

gk::verify::ConvShape conv_shape(const Values& args) {
  gk::verify::ConvShape shape;
  shape.n = args.integer("batch").value_or(1);
  shape.h = *args.integer("height");
  shape.w = *args.integer("width");
  shape.c = *args.integer("channels");
  shape.k = *args.integer("out-channels");
  shape.r = *args.integer("filter-height");
  shape.s = *args.integer("filter-width");
  const int stride = static_cast<int>(*args.integer("stride"));
  const int pad = static_cast<int>(*args.integer("pad"));
  const int dilation = static_cast<int>(*args.integer("dilation"));
  shape.geometry = {{stride, stride}, {pad, pad}, {dilation, dilation}};
  return shape;
}

std::optional<GemmExtents> gemm_extents(const Values& args) {
  if (!args.given("m")) return std::nullopt;
  return GemmExtents{*args.integer("m"), *args.integer("n"), *args.integer("k"),
                     args.given("batch") ? *args.integer("batch") : 1};
}

gk::Gemm& gemm_plan(gk::Plan& plan) {
  if (auto* gemm = dynamic_cast<gk::Gemm*>(&plan)) return *gemm;
  throw gk::ConfigError(std::string("--m, --n, --k name one GEMM's problem; a ") +
                        (dynamic_cast<gk::Conv2d*>(&plan) != nullptr
                             ? "--conv plan takes --batch, --height, --width, ..."
                             : "--grouped plan takes --groups with them in run") +
                        ".");
}

std::optional<gk::KernelSpec> sized_spec(gk::Plan& plan, const Values& args) {
  if (auto* conv = dynamic_cast<gk::Conv2d*>(&plan); conv != nullptr && conv_sizes_given(args)) {
    return conv_spec_for(*conv, args);
  }
  const auto e = gemm_extents(args);
  if (!e) return std::nullopt;
  return gemm_plan(plan).spec_for_problem(e->m, e->n, e->k, e->batch);
}

void require_gpu(const std::string& need, const std::string& without) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return;
  cudaGetLastError();  // clear the sticky "no device" status
  throw gk::CudaError(need + "; none found (cudaGetDeviceCount: " +
                          (status == cudaSuccess ? std::string("no devices") : cudaGetErrorName(status)) + "). " +
                          without,
                      static_cast<int>(status == cudaSuccess ? cudaErrorNoDevice : status));
}

std::unique_ptr<gk::Plan> plan_to_run(const Values& args, bool grouped) {
  const auto need_gpu = [] {
    require_gpu("gemmkit run needs a CUDA GPU", "`gemmkit compile` and `gemmkit plan` work without one.");
  };
  if (!args.given("cc")) need_gpu();
  auto plan = make_plan(args, grouped);
  need_gpu();
  return plan;
}

Problem run_problem(const Values& args) {
  const Problem p{*args.integer("m"),      *args.integer("n"),  *args.integer("k"), *args.integer("batch"),
                  *args.integer("repeat"), *args.real("alpha"), *args.real("beta")};
  for (const auto& [operand, rows, cols, names] :
       {std::tuple{"A", p.m, p.k, "--m, --k"}, {"B", p.k, p.n, "--k, --n"}, {"C and D", p.m, p.n, "--m, --n"}}) {
    // Each factor is at most 2^31-1, so the first product cannot overflow; the second is checked by division.
    const std::int64_t matrix = rows * cols;
    if (matrix > kInt32Max / p.batch) {
      throw UsageError(std::string(names) + " and --batch: " + operand + " would hold " + std::to_string(rows) + " x " +
                       std::to_string(cols) + " x " + std::to_string(p.batch) +
                       " elements; gemmkit run takes at most 2147483647 (2^31-1) per operand.");
    }
  }
  return p;
}

}  // namespace gemmkit::cli
