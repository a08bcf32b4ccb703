// gemmkit/torch_export_conv2d.cpp: gemmkit's torch glue for exported Conv2d kernels (fprop, dgrad, wgrad): the
// problem from the tensors per kind, channels_last checks, split-K, the checked run and the op's registration
// (gemmkit/torch_export_common.h has what the kinds share).
#include "gemmkit/torch_export_common.h"

namespace {

// An exported Conv2d kernel: what its binding declared, and where its entry points are.
struct Conv2dKernel {
  gk_torch_conv_kind kind;
  at::ScalarType a, b, c, d;
  int64_t alignment_a, alignment_b, alignment_c, alignment_d;
  gk_torch_split_k split_k;
  int kernel_cc;
  bool unit_stride;
  gk_torch_conv2d_entry_points entry_points;
};

// (N, C, H, W) activations or (K, C, R, S) filters, torch's order.
using Extent = std::array<int64_t, 4>;

// How messages name the tensors of each kind: A, B, the output D and the output size run() takes first.
struct Roles {
  const char *a, *b, *d, *size;
};

Roles roles(gk_torch_conv_kind kind) {
  switch (kind) {
    case GK_TORCH_FPROP: return {"A (input)", "B (weight)", "output", ""};
    case GK_TORCH_DGRAD: return {"A (grad_output)", "B (weight)", "grad_input", "input_size"};
    case GK_TORCH_WGRAD: return {"A (grad_output)", "B (input)", "grad_weight", "weight_size"};
  }
  TORCH_CHECK(false, "unknown gk_torch_conv_kind ", static_cast<int>(kind));
}

std::string extent_text(const Extent& e) {
  return "(" + std::to_string(e[0]) + ", " + std::to_string(e[1]) + ", " + std::to_string(e[2]) + ", " +
         std::to_string(e[3]) + ")";
}

// A 4-D tensor in channels_last memory of `dtype` on A's device, whose channels and address are multiples of
// `alignment`: its extents.
Extent check_channels_last(const at::Tensor& t, const char* name, at::ScalarType dtype, int64_t alignment,
                           const at::Tensor& A) {
  TORCH_CHECK_VALUE(t.dim() == 4, name, " must be 4-D, (N, C, H, W) activations or (K, C, R, S) filters; got shape ",
                    t.sizes());
  TORCH_CHECK_VALUE(t.scalar_type() == dtype, name, " has dtype ", t.scalar_type(), " but the kernel was built for ",
                    dtype);
  TORCH_CHECK_VALUE(t.device() == A.device(), name, " is on ", t.device(), " but A is on ", A.device(),
                    "; every tensor must be on A's device");
  TORCH_CHECK_VALUE(t.is_contiguous(at::MemoryFormat::ChannelsLast), name, " has shape ", t.sizes(), " and strides ",
                    t.strides(),
                    " but the kernel reads channels_last memory (NHWC / KRSC) in place; pass "
                    "x.contiguous(memory_format=torch.channels_last)");
  const auto address = t.is_meta() ? 0 : reinterpret_cast<std::uintptr_t>(t.data_ptr());
  TORCH_CHECK_VALUE(
      t.size(1) % alignment == 0 && address % static_cast<std::uintptr_t>(alignment * t.element_size()) == 0, name,
      " has ", t.size(1), " channels; its channel count and address must be multiples of ", alignment,
      " elements, the vectors the kernel reads; pad the channels or export a kernel with a smaller alignment");
  return {t.size(0), t.size(1), t.size(2), t.size(3)};
}

// The output size dgrad and wgrad take first.
Extent output_size(c10::IntArrayRef size, const char* name) {
  TORCH_CHECK_VALUE(size.size() == 4, name, " must be 4 extents, torch's order (N, C, H, W) or (K, C, R, S); got ",
                    size);
  for (const int64_t extent : size) TORCH_CHECK_VALUE(extent >= 0, name, " has a negative extent: ", size);
  return {size[0], size[1], size[2], size[3]};
}

// One (h, w) pair of the schema's int[2] arguments, each at least `least`.
std::array<int64_t, 2> pair(c10::IntArrayRef values, const char* name, int64_t least) {
  TORCH_CHECK_VALUE(values.size() == 2, name, " must be an int or a pair (h, w); got ", values);
  TORCH_CHECK_VALUE(values[0] >= least && values[1] >= least, name, " must be at least ", least, "; got ", values);
  return {values[0], values[1]};
}

struct Geometry {
  std::array<int64_t, 2> stride, padding, dilation;
};

std::string geometry_text(const Geometry& g) {
  const auto text = [](const std::array<int64_t, 2>& v) { return std::to_string(v[0]) + "x" + std::to_string(v[1]); };
  return "stride " + text(g.stride) + ", padding " + text(g.padding) + ", dilation " + text(g.dilation);
}

// What the kernel cannot take of the geometry and split-K, said before anything is allocated. `slices` > 1 splits.
void check_kernel_options(const Conv2dKernel& kernel, const Geometry& g, c10::string_view mode, int64_t slices) {
  const bool serial = mode == "serial", parallel = mode == "parallel";
  TORCH_CHECK_VALUE(serial || parallel, "split_k_mode is '", std::string(mode), "'; pass 'serial' or 'parallel'");
  TORCH_CHECK_VALUE(slices >= 1 && slices <= 65535, "split_k_slices is ", slices,
                    "; pass 1 (no split) up to 65535 (the grid's z extent)");
  const char* name = kernel.entry_points.kernel_name();
  if (slices > 1) {
    TORCH_CHECK_VALUE(kernel.split_k != GK_TORCH_SPLIT_K_NONE, "kernel ", name,
                      " is an SM90 conv kernel (TMA im2col), which has no split-K; split_k_slices is ", slices,
                      ": pass split_k_slices=1, or export a kernel_cc=80 plan's kernel (CUTLASS 2.x serial and "
                      "parallel split-K)");
    TORCH_CHECK_VALUE(!parallel || kernel.split_k == GK_TORCH_SPLIT_K_PARALLEL, "split_k_mode 'parallel' needs the ",
                      "parallel split-K kernel (partial sums and a reduction kernel), but kernel ", name,
                      " is the direct one; pass split_k_mode='serial', or export the kernel plan.spec_for(...) "
                      "returns after plan.set_split_k('parallel', slices)");
    TORCH_CHECK_VALUE(!serial || kernel.split_k == GK_TORCH_SPLIT_K_SERIAL, "split_k_mode 'serial' needs the direct ",
                      "kernel, but kernel ", name,
                      " is a parallel split-K module; pass split_k_mode='parallel', or export the "
                      "plan's direct kernel (plan.construct())");
  }
  if (kernel.kind != GK_TORCH_DGRAD) return;
  const bool unit_stride = g.stride[0] == 1 && g.stride[1] == 1;
  TORCH_CHECK_VALUE(unit_stride || kernel.kernel_cc != 90, "kernel ", name,
                    " is an SM90 conv kernel, which computes dgrad at unit stride only (CUTLASS 4.2's TMA im2col); ",
                    geometry_text(g), ": export a kernel_cc=80 plan's dgrad kernel (CUTLASS 2.x strided dgrad)");
  TORCH_CHECK_VALUE(unit_stride || !kernel.unit_stride, "kernel ", name,
                    " computes dgrad at stride 1 only (stride support unity); ", geometry_text(g),
                    ": export a plan's kernel with plan.stride_support = 'strided'");
  if (kernel.kernel_cc == 90 || kernel.unit_stride) return;
  // CUTLASS 2.x strided dgrad kernels (their can_implement's rules).
  TORCH_CHECK_VALUE(g.dilation[0] == 1 && g.dilation[1] == 1, "kernel ", name,
                    " is a strided dgrad kernel, which takes dilation 1 only (CUTLASS's strided dgrad kernels do not "
                    "dilate); ",
                    geometry_text(g), ": export a unit-stride kernel (plan.stride_support = 'unity') for dilations");
  TORCH_CHECK_VALUE(unit_stride || slices == 1, "kernel ", name,
                    " is a strided dgrad kernel, which has no split-K at a stride above 1; ", geometry_text(g),
                    ", split_k_slices ", slices, ": pass split_k_slices=1");
}

// The convolution of an input x (N, C, H, W) with a filter w (K, C, R, S): the output (N, K, P, Q).
Extent convolved(const Extent& x, const Extent& w, const Geometry& g, const char* x_name, const char* w_name) {
  TORCH_CHECK_VALUE(x[1] == w[1], x_name, " has ", x[1], " channels but ", w_name, " ", w[1],
                    "; the kernel computes groups = 1, where they are equal");
  TORCH_CHECK_VALUE(x[1] >= 1 && x[2] >= 1 && x[3] >= 1 && w[0] >= 1 && w[2] >= 1 && w[3] >= 1, "the input ",
                    extent_text(x), " and the filter ", extent_text(w),
                    " must have at least 1 channel, row, column and filter (only the batch may be 0)");
  const int64_t p = (x[2] + 2 * g.padding[0] - g.dilation[0] * (w[2] - 1) - 1) / g.stride[0] + 1;
  const int64_t q = (x[3] + 2 * g.padding[1] - g.dilation[1] * (w[3] - 1) - 1) / g.stride[1] + 1;
  TORCH_CHECK_VALUE(p >= 1 && q >= 1, "the filter ", w[2], " x ", w[3], " (dilation ", g.dilation[0], " x ",
                    g.dilation[1], ") is larger than the padded input ", x[2] + 2 * g.padding[0], " x ",
                    x[3] + 2 * g.padding[1]);
  return {x[0], w[0], p, q};
}

// An output of `sizes` in channels_last memory on `like`'s device (meta tensors, as torch.compile traces, too).
at::Tensor allocate_channels_last(const Extent& sizes, at::ScalarType dtype, const at::Tensor& like) {
  const int64_t c = sizes[1], h = sizes[2], w = sizes[3];
  const std::vector<int64_t> shape(sizes.begin(), sizes.end()), strides{h * w * c, 1, w * c, c};
  if (like.is_meta()) return like.new_empty_strided(shape, strides, like.options().dtype(dtype));
  return at::detail::empty_strided_cuda(shape, strides, dtype, like.device());
}

// D = act(alpha * conv + beta * C) of the kernel's kind (cross-correlation, as torch.nn.functional.conv2d and
// torch.nn.grad.conv2d_input / conv2d_weight, groups = 1); `size` is the output size dgrad and wgrad take.
at::Tensor run_conv2d(const Conv2dKernel& kernel, std::optional<c10::IntArrayRef> size, const at::Tensor& A,
                      const at::Tensor& B, const std::optional<at::Tensor>& C, c10::IntArrayRef stride_arg,
                      c10::IntArrayRef padding_arg, c10::IntArrayRef dilation_arg, double alpha, double beta,
                      c10::string_view split_k_mode, int64_t split_k_slices, double activation_parameter = 0.0) {
  const Roles role = roles(kernel.kind);
  TORCH_CHECK_VALUE(A.is_cuda() || A.is_meta(), "A is on ", A.device(), "; the kernel runs on CUDA tensors");
  const Extent a = check_channels_last(A, role.a, kernel.a, kernel.alignment_a, A);
  const Extent b = check_channels_last(B, role.b, kernel.b, kernel.alignment_b, A);
  const Geometry g{pair(stride_arg, "stride", 1), pair(padding_arg, "padding", 0), pair(dilation_arg, "dilation", 1)};
  check_kernel_options(kernel, g, split_k_mode, split_k_slices);

  // The input x and filter w as each kind holds them (abi.h's conv section); the output y follows from them.
  Extent x{}, w{}, d{};
  switch (kernel.kind) {
    case GK_TORCH_FPROP: x = a, w = b, d = convolved(x, w, g, role.a, role.b); break;
    case GK_TORCH_DGRAD: x = d = output_size(*size, role.size), w = b; break;
    case GK_TORCH_WGRAD: x = b, w = d = output_size(*size, role.size); break;
  }
  if (kernel.kind != GK_TORCH_FPROP) {
    const bool dgrad = kernel.kind == GK_TORCH_DGRAD;
    const Extent y = convolved(x, w, g, dgrad ? role.size : role.b, dgrad ? role.b : role.size);
    TORCH_CHECK_VALUE(a == y, role.a, " has shape ", A.sizes(), " but the convolution of an input ", extent_text(x),
                      " with a filter ", extent_text(w), " (", geometry_text(g), ") gives ", extent_text(y),
                      " (P = (H + 2 pad - dilation (R - 1) - 1) / stride + 1)");
    TORCH_CHECK_VALUE(!(kernel.kind == GK_TORCH_WGRAD && x[0] == 0), role.b, " has an empty batch, over which ", role.d,
                      " sums nothing; the kernel needs N >= 1");
  }
  TORCH_CHECK_VALUE(d[1] % kernel.alignment_d == 0, role.d, " has ", d[1], " channels: they must be a multiple of ",
                    kernel.alignment_d,
                    ", the vectors the kernel writes; pad them or export a kernel with a smaller "
                    "alignment");
  const bool c_given = C.has_value() && C->defined();
  TORCH_CHECK_VALUE(c_given || beta == 0.0, "beta is ", beta, " but no C was given; pass C or beta=0");
  if (c_given) {
    const Extent c = check_channels_last(*C, "C", kernel.c, kernel.alignment_c, A);
    TORCH_CHECK_VALUE(c == d, "C has shape ", C->sizes(), " but the ", role.d, " is ", extent_text(d));
  }
  for (const int64_t extent : {x[0], x[1], x[2], x[3], w[0], w[2], w[3], g.padding[0], g.padding[1], g.stride[0],
                               g.stride[1], g.dilation[0], g.dilation[1]}) {
    TORCH_CHECK_VALUE(extent <= INT32_MAX, "an extent or parameter of ", extent, " exceeds 2^31-1");
  }
  at::Tensor D = allocate_channels_last(d, kernel.d, A);
  if (A.is_meta() || x[0] == 0) return D;  // an empty batch: fprop's and dgrad's outputs are empty too

  const int device = A.get_device();
  const DeviceGuard guard(device);
  const Extent y = kernel.kind == GK_TORCH_FPROP ? d : a;
  gk_conv2d_args args{};
  args.n = static_cast<int32_t>(x[0]), args.c = static_cast<int32_t>(x[1]);
  args.h = static_cast<int32_t>(x[2]), args.w = static_cast<int32_t>(x[3]);
  args.k = static_cast<int32_t>(w[0]), args.r = static_cast<int32_t>(w[2]), args.s = static_cast<int32_t>(w[3]);
  args.p = static_cast<int32_t>(y[2]), args.q = static_cast<int32_t>(y[3]);
  args.pad_h = static_cast<int32_t>(g.padding[0]), args.pad_w = static_cast<int32_t>(g.padding[1]);
  args.stride_h = static_cast<int32_t>(g.stride[0]), args.stride_w = static_cast<int32_t>(g.stride[1]);
  args.dilation_h = static_cast<int32_t>(g.dilation[0]), args.dilation_w = static_cast<int32_t>(g.dilation[1]);
  args.split_k_slices = static_cast<int32_t>(split_k_slices);
  args.A = A.data_ptr();
  args.B = B.data_ptr();
  args.C = c_given ? C->data_ptr() : nullptr;
  args.D = D.data_ptr();
  args.alpha = alpha;
  args.beta = beta;
  args.activation_params[0] = activation_parameter;
  args.device_id = device;

  const gk_torch_conv2d_entry_points& kernel_module = kernel.entry_points;
  const auto problem = [&] {
    return "the input " + extent_text(x) + " and filter " + extent_text(w) + " (" + geometry_text(g) +
           ", split_k_slices " + std::to_string(split_k_slices) + ")";
  };
  const int implementable = kernel_module.can_implement(&args);
  TORCH_CHECK_VALUE(implementable == GK_OK, "kernel ", kernel_module.kernel_name(), " cannot compute ", problem(), ": ",
                    status_text(implementable),
                    kernel.kernel_cc == 90
                        ? " (SM90 TMA im2col kernels take dilated filters under 256 and paddings that keep the im2col "
                          "box corners within [-128, 127]; kernel_cc=80 kernels have neither limit)"
                        : " (e.g. an optimized kernel takes filters of at most 32 x 32)",
                    "; export one for this problem");
  const int status = run_with_workspace(kernel_module, args, A, device);
  TORCH_CHECK(status == GK_OK, "kernel ", kernel_module.kernel_name(), " refused ", problem(), ": ",
              status_text(status));
  return D;
}

template <class... T>
struct Types {};

// The registered function, run's schema as C++: `Size...` is the output size dgrad and wgrad take first (none for
// fprop), `Slope...` leaky_relu's slope last (none for other activations).
template <class Sizes, class Slopes>
struct Conv2dOp;

template <class... Size, class... Slope>
struct Conv2dOp<Types<Size...>, Types<Slope...>> {
  Conv2dKernel kernel;

  at::Tensor operator()(Size... size, const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C,
                        c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, double alpha,
                        double beta, c10::string_view split_k_mode, int64_t split_k_slices, Slope... slope) const {
    return run_conv2d(kernel, std::optional<c10::IntArrayRef>(size...), A, B, C, stride, padding, dilation, alpha, beta,
                      split_k_mode, split_k_slices, slope...);
  }
};

template <class... Size>
void implement(torch::Library& library, const Conv2dKernel& kernel, bool takes_slope) {
  if (takes_slope) {
    library.impl("run", Conv2dOp<Types<Size...>, Types<double>>{kernel});
  } else {
    library.impl("run", Conv2dOp<Types<Size...>, Types<>>{kernel});
  }
}

}  // namespace

extern "C" const char* gk_torch_register_conv2d_v2(const char* ns, const char* schema, const gk_torch_conv2d_kernel* k,
                                                   const gk_torch_conv2d_entry_points* entry_points) {
  return register_op(ns, schema, [&](torch::Library& library) {
    const Conv2dKernel kernel{k->kind,           scalar_type(k->a), scalar_type(k->b), scalar_type(k->c),
                              scalar_type(k->d), k->alignment_a,    k->alignment_b,    k->alignment_c,
                              k->alignment_d,    k->split_k,        k->kernel_cc,      k->unit_stride != 0,
                              *entry_points};
    if (kernel.kind == GK_TORCH_FPROP) {
      implement<>(library, kernel, k->takes_slope != 0);
    } else {
      implement<c10::IntArrayRef>(library, kernel, k->takes_slope != 0);
    }
  });
}
