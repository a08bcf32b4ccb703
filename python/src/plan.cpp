// python/src/plan.cpp: the plans (Gemm, GroupedGemm, Conv2d and their common base). Typed on purpose: the
// pure-Python layer (gemmkit/op.py) turns strings, numpy/torch dtypes and streams into these types. The values
// around them (TileDescription, KernelSpec, ...) and the module's functions are bound in values.cpp.
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>
#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "gemmkit/cache.hpp"
#include "gemmkit/conv2d.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/gemm.hpp"
#include "gemmkit/grouped_gemm.hpp"
#include "gemmkit/jit.hpp"
#include "gemmkit/tuning.hpp"

namespace gemmkit::python {
namespace {

using namespace nb::literals;
using OptType = std::optional<DataType>;
using OptLayout = std::optional<Layout>;
using OptInt = std::optional<int>;

// The constructor both plans share (keyword arguments only, as the pure-Python layer passes them).
template <class Class>
void def_plan_init(Class& cls) {
  using Plan = typename Class::Type;
  cls.def(
      "__init__",
      [](Plan* self, OptType element, OptType element_A, OptType element_B, OptType element_C, OptType element_D,
         OptType element_accumulator, OptLayout layout, OptLayout layout_A, OptLayout layout_B, OptLayout layout_C,
         nb::handle A, nb::handle B, nb::handle C, nb::handle D, OptInt cc, OptInt kernel_cc) {
        const auto a = to_optional_tensor(A, "A", false), b = to_optional_tensor(B, "B", false),
                   c = to_optional_tensor(C, "C", false), d = to_optional_tensor(D, "D", false);
        GemmOptions o;
        o.element = element;
        o.element_a = element_A;
        o.element_b = element_B;
        o.element_c = element_C;
        o.element_d = element_D;
        o.element_accumulator = element_accumulator;
        o.layout = layout;
        o.layout_a = layout_A;
        o.layout_b = layout_B;
        o.layout_c = layout_C;
        o.A = a ? &a->view : nullptr;
        o.B = b ? &b->view : nullptr;
        o.C = c ? &c->view : nullptr;
        o.D = d ? &d->view : nullptr;
        o.cc = cc;
        o.kernel_cc = kernel_cc;
        new (self) Plan(o);
      },
      nb::kw_only(), "element"_a = nb::none(), "element_A"_a = nb::none(), "element_B"_a = nb::none(),
      "element_C"_a = nb::none(), "element_D"_a = nb::none(), "element_accumulator"_a = nb::none(),
      "layout"_a = nb::none(), "layout_A"_a = nb::none(), "layout_B"_a = nb::none(), "layout_C"_a = nb::none(),
      "A"_a = nb::none(), "B"_a = nb::none(), "C"_a = nb::none(), "D"_a = nb::none(), "cc"_a = nb::none(),
      "kernel_cc"_a = nb::none());
}

// A Python list of tensors as views, named A[0], A[1], ...; `held` keeps what they point into alive.
std::vector<TensorView> to_views(nb::handle list, const char* name, bool writable, std::vector<PyTensor>& held) {
  std::vector<TensorView> views;
  if (list.is_none()) return views;
  std::size_t g = 0;
  for (nb::handle item : list) {
    const std::string item_name = std::string(name) + "[" + std::to_string(g++) + "]";
    held.push_back(to_tensor(item, item_name.c_str(), writable));
    views.push_back(held.back().view);
  }
  return views;
}

// A method of the grouped plan that asks `query` (spec_for_contiguous or rival_for_contiguous) about Python tensors.
template <class Class, class Query>
void def_contiguous_query(Class& cls, const char* name, Query query, const char* doc) {
  cls.def(
      name,
      [query](GroupedGemm& plan, nb::handle A, nb::handle B, nb::handle D, nb::handle offsets, nb::handle C,
              double beta) {
        const auto a = to_tensor(A, "A", false), b = to_tensor(B, "B", false), d = to_tensor(D, "D", true),
                   o = to_tensor(offsets, "offsets", false);
        const auto c = to_optional_tensor(C, "C", false);
        return (plan.*query)(a.view, b.view, c ? &c->view : nullptr, d.view, o.view, beta);
      },
      "A"_a, "B"_a, "D"_a, "offsets"_a, "C"_a = nb::none(), "beta"_a = 0.0, doc);
}

void bind_grouped_gemm(nb::module_& m) {
  auto cls = nb::class_<GroupedGemm, Plan>(
      m, "GroupedGemm", "The C++ grouped plan, typed. Use gemmkit.GroupedGemm, which also takes names and dtypes.");
  def_plan_init(cls);
  cls.def(
         "spec_for",
         [](GroupedGemm& plan, nb::handle A, nb::handle B, nb::handle C, nb::handle D, double beta) {
           std::vector<PyTensor> held;
           return plan.spec_for(to_views(A, "A", false, held), to_views(B, "B", false, held),
                                to_views(C, "C", false, held), to_views(D, "D", true, held), beta);
         },
         "A"_a, "B"_a, "C"_a.none(), "D"_a, "beta"_a = 0.0,
         "The kernel run() would use for these lists (same checks; nothing runs; no GPU needed).")
      .def(
          "run",
          [](GroupedGemm& plan, nb::handle A, nb::handle B, nb::handle C, nb::handle D, double alpha, double beta,
             std::optional<std::uintptr_t> stream, bool sync) {
            std::vector<PyTensor> held;
            const auto a = to_views(A, "A", false, held), b = to_views(B, "B", false, held),
                       c = to_views(C, "C", false, held), d = to_views(D, "D", true, held);
            RunOptions options;
            // By default the stream of D[0]'s framework (torch's or cupy's current one).
            const std::uintptr_t framework = d.empty() ? 0 : framework_stream(D.attr("__getitem__")(0), d[0].device);
            options.stream = reinterpret_cast<cudaStream_t>(stream ? *stream : framework);
            options.sync = sync;
            nb::gil_scoped_release release;  // the arrays above stay referenced until the GIL is back
            plan.run(a, b, c, d, alpha, beta, options);
          },
          "A"_a, "B"_a, "C"_a.none(), "D"_a, "alpha"_a = 1.0, "beta"_a = 0.0, "stream"_a = nb::none(), "sync"_a = true,
          "D[g] = act(alpha * A[g] @ B[g] + beta * C[g]) for every group, in one launch (lists of 2-D tensors; C may "
          "be None when beta is 0).")
      .def(
          "run_contiguous",
          [](GroupedGemm& plan, nb::handle A, nb::handle B, nb::handle D, nb::handle offsets, nb::handle C,
             double alpha, double beta, std::optional<std::uintptr_t> stream, bool sync, nb::handle scale_a,
             nb::handle scale_b) {
            const auto a = to_tensor(A, "A", false), b = to_tensor(B, "B", false), d = to_tensor(D, "D", true),
                       o = to_tensor(offsets, "offsets", false);
            const auto c = to_optional_tensor(C, "C", false);
            const auto scale_a_tensor = to_optional_tensor(scale_a, "scale_a", false);
            const auto scale_b_tensor = to_optional_tensor(scale_b, "scale_b", false);
            RunOptions options;
            options.scale_a = scale_a_tensor ? &scale_a_tensor->view : nullptr;
            options.scale_b = scale_b_tensor ? &scale_b_tensor->view : nullptr;
            options.stream = reinterpret_cast<cudaStream_t>(stream ? *stream : framework_stream(D, d.view.device));
            options.sync = sync;
            nb::gil_scoped_release release;
            plan.run_contiguous(a.view, b.view, c ? &c->view : nullptr, d.view, o.view, alpha, beta, options);
          },
          "A"_a, "B"_a, "D"_a, "offsets"_a, "C"_a = nb::none(), "alpha"_a = 1.0, "beta"_a = 0.0,
          "stream"_a = nb::none(), "sync"_a = true, "scale_a"_a = nb::none(), "scale_b"_a = nb::none(),
          "The MoE form: A [total_M, K], B [G, K, N] (a [G, N, K] weight transposed also works), D [total_M, N], "
          "offsets a device int32 [G] of cumulative row ends; the GPU reads the group sizes (graph-capturable). A "
          "block-scaled plan takes scale_a [total_M, ceil(K/128)] and scale_b [G, ceil(N/128), ceil(K/128)], "
          "float32, row-major.")
      .def_prop_rw("block_scaling", &GroupedGemm::block_scaling, &GroupedGemm::set_block_scaling,
                   "FP8 block scales applied in the mainloop (SM90, the MoE form): blockwise scales A per row and "
                   "128-wide K block and each group's B per 128 x 128 block (run_contiguous(scale_a=..., "
                   "scale_b=...)).");
  def_contiguous_query(cls, "spec_for_contiguous", &GroupedGemm::spec_for_contiguous,
                       "The kernel run_contiguous() runs for these tensors (same checks but where they live and the "
                       "block scales; nothing runs; no GPU needed). Where it is a 256 x 128 tile over an N that 256 "
                       "does not divide and the experts average fewer than 1024 rows, the 128 x 256 one "
                       "(rival_for_contiguous) is launched beside it and the GPU runs whichever needs fewer waves on "
                       "the group sizes.");
  def_contiguous_query(cls, "rival_for_contiguous", &GroupedGemm::rival_for_contiguous,
                       "The kernel run_contiguous() launches beside spec_for_contiguous()'s where the GPU picks "
                       "between the two, else None.");
}

using Pair = std::array<int, 2>;

Conv2dGeometry geometry(Pair stride, Pair padding, Pair dilation) {
  return Conv2dGeometry{stride, padding, dilation};
}

PyTensor required_conv_tensor(nb::handle obj, const char* name, bool writable) {
  std::optional<PyTensor> tensor = to_conv_tensor(obj, name, writable);
  if (!tensor) return to_tensor(obj, name, writable);  // None: to_tensor's "must be set"
  return std::move(*tensor);
}

// A GEMM's operands as views (D writable), handed to `use`; C may be None.
template <class Use>
auto with_gemm_views(nb::handle A, nb::handle B, nb::handle C, nb::handle D, Use&& use) {
  const auto a = to_tensor(A, "A", false), b = to_tensor(B, "B", false), d = to_tensor(D, "D", true);
  const auto c = to_optional_tensor(C, "C", false);
  return use(a.view, b.view, c ? &c->view : nullptr, d.view);
}

// spec_for's, split_k_for's and run's operands as views (D writable), handed to `use`; C may be None.
template <class Use>
auto with_conv_views(nb::handle A, nb::handle B, nb::handle C, nb::handle D, Use&& use) {
  const auto a = required_conv_tensor(A, "A", false), b = required_conv_tensor(B, "B", false);
  const auto d = required_conv_tensor(D, "D", true);
  const auto c = to_conv_tensor(C, "C", false);
  return use(a.view, b.view, c ? &c->view : nullptr, d.view);
}

// Conv tensors: NHWC / KRSC arrays, or torch's (N, C, H, W) tensors in channels_last memory (to_conv_tensor).
void bind_conv2d(nb::module_& m) {
  auto cls = nb::class_<Conv2d, Plan>(
      m, "Conv2d", "The C++ Conv2d plan, typed. Use gemmkit.Conv2d, which also takes names, dtypes and torch tensors.");
  cls.def(
         "__init__",
         [](Conv2d* self, ConvKind kind, OptType element, OptType element_A, OptType element_B, OptType element_C,
            OptType element_D, OptType element_accumulator, OptInt cc, OptInt kernel_cc) {
           Conv2dOptions o;
           o.kind = kind;
           o.element = element;
           o.element_a = element_A;
           o.element_b = element_B;
           o.element_c = element_C;
           o.element_d = element_D;
           o.element_accumulator = element_accumulator;
           o.cc = cc;
           o.kernel_cc = kernel_cc;
           new (self) Conv2d(o);
         },
         "kind"_a, nb::kw_only(), "element"_a = nb::none(), "element_A"_a = nb::none(), "element_B"_a = nb::none(),
         "element_C"_a = nb::none(), "element_D"_a = nb::none(), "element_accumulator"_a = nb::none(),
         "cc"_a = nb::none(), "kernel_cc"_a = nb::none())
      .def_prop_ro("kind", &Conv2d::kind)
      .def_prop_rw("iterator_algorithm", &Conv2d::iterator_algorithm, &Conv2d::set_iterator_algorithm,
                   "None: optimized where the problem allows it at run time (construct() names the analytic kernel).")
      .def_prop_rw("swizzling_stride", &Conv2d::swizzling_stride, &Conv2d::set_swizzling_stride,
                   "The 2.x kernels' threadblock swizzle stride: 1, 2, 4 or 8.")
      .def_prop_rw("stride_support", &Conv2d::stride_support, &Conv2d::set_stride_support,
                   "Dgrad: unity (unit strides only) or strided; None: by the problem's stride at run time.")
      .def_prop_ro("split_k_mode", &Conv2d::split_k_mode,
                   "serial or parallel as set; None: run() chooses (parallel for wgrad problems under a wave).")
      .def_prop_ro("split_k_slices", &Conv2d::split_k_slices, "As set; 0: run() chooses per problem.")
      .def("set_split_k", &Conv2d::set_split_k, "mode"_a.none(), "slices"_a = 0,
           "(mode, slices): slices 0 lets run() choose the count; (None, 0) lets it choose both.")
      .def_static(
          "output_size",
          [](std::array<std::int64_t, 4> input, std::array<std::int64_t, 4> weight, Pair padding, Pair stride,
             Pair dilation) { return Conv2d::output_size(input, weight, geometry(stride, padding, dilation)); },
          "input_size"_a, "weight_size"_a, "padding"_a = Pair{0, 0}, "stride"_a = Pair{1, 1}, "dilation"_a = Pair{1, 1},
          "(N, P, Q, K) of an input (N, H, W, C) under a filter (K, R, S, C): P = (H + 2 pad - dilation (R - 1) - 1) "
          "/ stride + 1.")
      .def(
          "spec_for",
          [](Conv2d& plan, nb::handle A, nb::handle B, nb::handle C, nb::handle D, Pair stride, Pair padding,
             Pair dilation, double beta) {
            return with_conv_views(
                A, B, C, D, [&](const TensorView& a, const TensorView& b, const TensorView* c, const TensorView& d) {
                  return plan.spec_for(a, b, c, d, geometry(stride, padding, dilation), beta);
                });
          },
          "A"_a, "B"_a, "C"_a.none(), "D"_a, "stride"_a = Pair{1, 1}, "padding"_a = Pair{0, 0},
          "dilation"_a = Pair{1, 1}, "beta"_a = 0.0,
          "The kernel run() would use for these NHWC / KRSC tensors (same checks; nothing runs; no GPU needed).")
      .def(
          "split_k_for",
          [](Conv2d& plan, nb::handle A, nb::handle B, nb::handle C, nb::handle D, Pair stride, Pair padding,
             Pair dilation, double beta) {
            return with_conv_views(
                A, B, C, D, [&](const TensorView& a, const TensorView& b, const TensorView* c, const TensorView& d) {
                  const Conv2dSplitK split = plan.split_k_for(a, b, c, d, geometry(stride, padding, dilation), beta);
                  return std::make_pair(split.mode, split.slices);
                });
          },
          "A"_a, "B"_a, "C"_a.none(), "D"_a, "stride"_a = Pair{1, 1}, "padding"_a = Pair{0, 0},
          "dilation"_a = Pair{1, 1}, "beta"_a = 0.0,
          "(mode, slices): the split-K run() would use for these NHWC / KRSC tensors (slices 1: none).")
      .def(
          "run",
          [](Conv2d& plan, nb::handle A, nb::handle B, nb::handle C, nb::handle D, Pair stride, Pair padding,
             Pair dilation, double alpha, double beta, std::optional<std::uintptr_t> stream, bool sync) {
            with_conv_views(
                A, B, C, D, [&](const TensorView& a, const TensorView& b, const TensorView* c, const TensorView& d) {
                  RunOptions options;
                  options.stream = reinterpret_cast<cudaStream_t>(stream ? *stream : framework_stream(D, d.device));
                  options.sync = sync;
                  nb::gil_scoped_release release;
                  plan.run(a, b, c, d, geometry(stride, padding, dilation), alpha, beta, options);
                });
          },
          "A"_a, "B"_a, "C"_a.none(), "D"_a, "stride"_a = Pair{1, 1}, "padding"_a = Pair{0, 0},
          "dilation"_a = Pair{1, 1}, "alpha"_a = 1.0, "beta"_a = 0.0, "stream"_a = nb::none(), "sync"_a = true,
          "D = act(alpha * conv(A, B) + beta * C) on NHWC / KRSC tensors.");
}

void bind_plan_base(nb::module_& m) {
  nb::class_<Plan>(m, "Plan", "What every C++ plan (Gemm, GroupedGemm, Conv2d) is configured with.")
      .def_prop_ro("cc", &Plan::cc)
      .def_prop_ro("kernel_cc", &Plan::kernel_cc, "The kernel generation the plan uses: 80 (CUTLASS 2.x) or 90 (3.x).")
      .def_prop_ro("element_A", &Plan::element_a)
      .def_prop_ro("element_B", &Plan::element_b)
      .def_prop_ro("element_C", &Plan::element_c)
      .def_prop_ro("element_D", &Plan::element_d)
      .def_prop_ro("element_accumulator", &Plan::element_accumulator)
      .def_prop_ro("layout_A", &Plan::layout_a)
      .def_prop_ro("layout_B", &Plan::layout_b)
      .def_prop_ro("layout_C", &Plan::layout_c)
      .def_prop_rw("opclass", &Plan::opclass, &Plan::set_opclass)
      .def("opclasses", &Plan::opclasses)
      .def_prop_rw("math_operation", &Plan::math_operation, &Plan::set_math_operation, nb::arg("math").none(),
                   "The kernels' math operation (None: the family's default).")
      .def("math_operations", &Plan::math_operations, "The math operations on offer, the default first.")
      .def("tile_descriptions", &Plan::tile_descriptions, "Every valid configuration (default first).")
      .def_prop_rw("tile_description", &Plan::tile_description, &Plan::set_tile_description,
                   "The configuration set on the plan (None: chosen per alignment).")
      .def_prop_rw("swizzling_functor", &Plan::swizzling_functor, &Plan::set_swizzling_functor)
      .def("swizzling_functors", &Plan::swizzling_functors)
      .def_prop_ro("activation", &Plan::activation)
      .def_prop_ro("activation_parameter", &Plan::activation_parameter, "The leaky_relu slope.")
      .def("set_activation", &Plan::set_activation, "activation"_a, "parameter"_a = 0.01)
      .def_static("activations", &Plan::activations)
      .def("construct", &Plan::construct, "tile_description"_a = nb::none(), "alignment_A"_a = nb::none(),
           "alignment_B"_a = nb::none(), "alignment_C"_a = nb::none(),
           "The KernelSpec for the widest alignments (or those given); a tile given here stays in the plan.")
      .def("spec", &Plan::spec, "alignment_A"_a = nb::none(), "alignment_B"_a = nb::none(),
           "alignment_C"_a = nb::none(), "Like construct() without storing anything.")
      .def("kernel_name", &Plan::kernel_name)
      .def("render_source", &Plan::render_source)
      .def("compile", &Plan::compile, "tile_description"_a = nb::none(), nb::call_guard<nb::gil_scoped_release>(),
           "Generates and compiles the kernel through the on-disk cache (needs nvcc, not a GPU).");
}

void bind_gemm(nb::module_& m) {
  auto cls = nb::class_<Gemm, Plan>(
      m, "Gemm", "The C++ plan, typed. Use gemmkit.Gemm, which also takes names and numpy/torch dtypes.");
  def_plan_init(cls);
  cls.def_prop_rw(
      "epilogue_visitor", [](const Gemm& plan) { return plan.epilogue_visitor(); },
      [](Gemm& plan, std::optional<epilogue::Epilogue> tree) { plan.set_epilogue_visitor(std::move(tree)); },
      nb::arg("tree").none(),
      "An epilogue visitor tree (gemmkit.epilogue.trace) in place of alpha/beta, bias and activation; run() takes "
      "its tensors by name (visitor_args). None returns to the plain epilogue. A tree of the plain form "
      "act(alpha * (acc * row_scale * column_scale) + beta * C + bias) runs the fused kernel of those settings.");
  cls.def_prop_ro("epilogue", &Gemm::epilogue,
                  "The plan's epilogue as a tree: the visitor tree, else plain_epilogue of its activation, bias and "
                  "scales.");
  cls.def_prop_rw("bias", &Gemm::bias, &Gemm::set_bias,
                  "A bias vector added before the activation, per output row or column (run(bias=...)).")
      .def_prop_rw("scale", &Gemm::scale, &Gemm::set_scale,
                   "f32 scale vectors multiplying the accumulator per output row and/or column, e.g. FP8 "
                   "dequantization scales (run(row_scale=..., column_scale=...); SM90 kernels).")
      .def_prop_rw("block_scaling", &Gemm::block_scaling, &Gemm::set_block_scaling,
                   "FP8 block scales applied in the mainloop (SM90): blockwise scales A per row and 128-wide K block "
                   "and B per 128 x 128 block (run(scale_a=..., scale_b=...), torch._scaled_mm's layouts).")
      .def_prop_rw("activation_at_launch", &Gemm::activation_at_launch, &Gemm::set_activation_at_launch,
                   "SM90 kernels on CUTLASS's epilogues take a fused activation at launch: one kernel for every "
                   "activation (default: GEMMKIT_ACTIVATION_AT_LAUNCH, on; FP8 operands: off).")
      .def_prop_rw("raster_order", &Gemm::raster_order, &Gemm::set_raster_order,
                   "SM90 persistent schedulers: the order output tiles are walked in (run-time only).")
      .def_prop_rw("max_swizzle_size", &Gemm::max_swizzle_size, &Gemm::set_max_swizzle_size,
                   "SM90 persistent schedulers: 1, 2, 4 or 8, or 0 (the default): run() chooses per problem "
                   "(run-time only).")
      .def_prop_rw("decomposition", &Gemm::decomposition, &Gemm::set_decomposition,
                   "SM90 Stream-K kernels: how K is shared out (Auto: run() chooses per shape; run-time only).")
      .def_prop_ro("split_k_slices", &Gemm::split_k_slices, "1: run() chooses; n > 1: split-K into n slices.")
      .def("set_split_k_slices", &Gemm::set_split_k_slices, "slices"_a,
           "Split every output tile's K extent into this many slices on a Stream-K kernel (1: run() chooses).")
      .def_prop_rw("reduction_mode", &Gemm::reduction_mode, &Gemm::set_reduction_mode,
                   "Split-K / Stream-K partial sums: Deterministic (in K order) or Nondeterministic.")
      .def(
          "spec_for",
          [](Gemm& plan, nb::handle A, nb::handle B, nb::handle C, nb::handle D, double beta) {
            return with_gemm_views(
                A, B, C, D, [&](const TensorView& a, const TensorView& b, const TensorView* c, const TensorView& d) {
                  return plan.spec_for(a, b, c, d, beta);
                });
          },
          "A"_a.none(), "B"_a.none(), "C"_a.none(), "D"_a.none(), "beta"_a = 0.0,
          "The kernel run() would use for these tensors (same checks; nothing runs; no GPU needed).")
      .def(
          "running_kernel_name",
          [](Gemm& plan, nb::handle A, nb::handle B, nb::handle C, nb::handle D, double beta) {
            return with_gemm_views(
                A, B, C, D, [&](const TensorView& a, const TensorView& b, const TensorView* c, const TensorView& d) {
                  return plan.running_kernel_name(a, b, c, d, beta);
                });
          },
          "A"_a, "B"_a, "C"_a.none(), "D"_a, "beta"_a = 0.0,
          "The kernel run() launches for these tensors now: spec_for's once built, else the one standing in for it "
          "while it compiles in the background; \"\" before the first run. Nothing compiles.")
      .def("spec_for_problem", &Gemm::spec_for_problem, "m"_a, "n"_a, "k"_a, "batch"_a = 1,
           "The kernel run() would use for an m x n x k problem on packed device tensors of the plan's types and "
           "layouts (nothing runs; no GPU and no tensors needed: e.g. to compile FP8 kernels ahead of time).")
      .def(
          "run",
          [](Gemm& plan, nb::handle A, nb::handle B, nb::handle C, nb::handle D, double alpha, double beta,
             std::optional<std::uintptr_t> stream, bool sync, nb::handle bias, nb::handle row_scale,
             nb::handle column_scale, nb::handle scale_a, nb::handle scale_b, std::optional<nb::dict> visitor_args) {
            const auto a = to_tensor(A, "A", false), b = to_tensor(B, "B", false), d = to_tensor(D, "D", true);
            const auto c = to_optional_tensor(C, "C", false);
            const auto bias_tensor = to_optional_tensor(bias, "bias", false);
            const auto row_scale_tensor = to_optional_tensor(row_scale, "row_scale", false);
            const auto column_scale_tensor = to_optional_tensor(column_scale, "column_scale", false);
            const auto scale_a_tensor = to_optional_tensor(scale_a, "scale_a", false);
            const auto scale_b_tensor = to_optional_tensor(scale_b, "scale_b", false);
            RunOptions options;
            options.scale_a = scale_a_tensor ? &scale_a_tensor->view : nullptr;
            options.scale_b = scale_b_tensor ? &scale_b_tensor->view : nullptr;
            options.bias = bias_tensor ? &bias_tensor->view : nullptr;
            options.row_scale = row_scale_tensor ? &row_scale_tensor->view : nullptr;
            options.column_scale = column_scale_tensor ? &column_scale_tensor->view : nullptr;
            options.stream = reinterpret_cast<cudaStream_t>(stream ? *stream : framework_stream(D, d.view.device));
            options.sync = sync;
            // Visitor tensors by name (numbers are scalars); the converted arrays stay alive for the call.
            std::vector<PyTensor> visitor_tensors;
            if (visitor_args) {
              visitor_tensors.reserve(visitor_args->size());
              for (auto [key, value] : *visitor_args) {
                VisitorArgument arg;
                arg.name = nb::cast<std::string>(key);
                if (nb::isinstance<nb::float_>(value) || nb::isinstance<nb::int_>(value)) {
                  arg.value = nb::cast<double>(value);
                } else {
                  visitor_tensors.push_back(to_tensor(value, arg.name.c_str(), true));
                  arg.tensor = visitor_tensors.back().view;
                }
                options.visitor_args.push_back(std::move(arg));
              }
            }
            nb::gil_scoped_release release;  // the arrays above stay referenced until the GIL is back
            plan.run(a.view, b.view, c ? &c->view : nullptr, d.view, alpha, beta, options);
          },
          "A"_a.none(), "B"_a.none(), "C"_a.none(), "D"_a.none(), "alpha"_a = 1.0, "beta"_a = 0.0,
          "stream"_a = nb::none(), "sync"_a = true, "bias"_a = nb::none(), "row_scale"_a = nb::none(),
          "column_scale"_a = nb::none(), "scale_a"_a = nb::none(), "scale_b"_a = nb::none(),
          "visitor_args"_a = nb::none(),
          "D = act(alpha * (A @ B * row_scale * column_scale) + beta * C + bias) on a stream handle (None: "
          "default_stream(D), i.e. torch's or cupy's current stream); with block scaling, A and B's 128-deep K "
          "blocks are scaled by scale_a and scale_b. Host arrays are staged and D holds the result on return.")
      .def(
          "tune",
          [](Gemm& plan, nb::handle A, nb::handle B, nb::handle C, nb::handle D, double alpha, double beta,
             std::optional<std::uintptr_t> stream, int max_candidates, double time_budget_s, bool store, bool verbose,
             double min_gain) {
            const auto a = to_tensor(A, "A", false), b = to_tensor(B, "B", false), d = to_tensor(D, "D", true);
            const auto c = to_optional_tensor(C, "C", false);
            TuneOptions options;
            options.alpha = alpha;
            options.beta = beta;
            options.stream = reinterpret_cast<cudaStream_t>(stream ? *stream : framework_stream(D, d.view.device));
            options.max_candidates = max_candidates;
            options.time_budget_s = time_budget_s;
            options.min_gain = min_gain;
            options.store = store;
            if (verbose)
              options.progress = [](const std::string& line) { std::fprintf(stderr, "  %s\n", line.c_str()); };
            TuneResult result;
            {
              nb::gil_scoped_release release;
              result = plan.tune(a.view, b.view, c ? &c->view : nullptr, d.view, options);
            }
            return nb::module_::import_("json").attr("loads")(nlohmann::ordered_json(result).dump());
          },
          "A"_a.none(), "B"_a.none(), "C"_a.none(), "D"_a.none(), "alpha"_a = 1.0, "beta"_a = 0.0,
          "stream"_a = nb::none(), "max_candidates"_a = 12, "time_budget_s"_a = 110.0, "store"_a = true,
          "verbose"_a = false, "min_gain"_a = 0.03,
          "Autotuning on device tensors: compiles up to max_candidates configurations in parallel, times each "
          "(warm-up, median), checks its result, stores the fastest (if at least min_gain faster than the heuristic's "
          "choice, else that) in the tuning database (run() then uses it for this plan and shape bucket in every "
          "process). Returns a dict: best, best_ms, heuristic, heuristic_ms, "
          "speedup, stored, database, candidates. D is overwritten.");
}

}  // namespace

void bind_plan(nb::module_& m) {
  bind_values(m);  // first: the plans' signatures name these types
  bind_functions(m);
  bind_plan_base(m);
  bind_gemm(m);
  bind_grouped_gemm(m);
  bind_conv2d(m);
}

}  // namespace gemmkit::python
