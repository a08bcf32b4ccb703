// gemmkit/torch_export_conv2d.cpp: gemmkit's torch glue for exported Conv2d (fprop) kernels: channels_last checks, the
// checked run and the op's registration (gemmkit/torch_export_common.h has what the kinds share).
#include "gemmkit/torch_export_common.h"

namespace {

// An exported Conv2d fprop kernel: its element types and vectors, and where its entry points are.
struct Conv2dKernel {
  at::ScalarType input, weight, output;
  int64_t alignment_input, alignment_weight, alignment_output;
  gk_torch_conv2d_entry_points entry_points;
};

// A 4-D tensor (N, C, H, W) in channels_last memory of `dtype` on `first`'s device, whose channels and address are
// multiples of `alignment`.
void check_channels_last(const at::Tensor& t, const char* name, at::ScalarType dtype, int64_t alignment,
                         const at::Tensor& first) {
  TORCH_CHECK_VALUE(t.dim() == 4, name, " must be 4-D, (N, C, H, W) activations or (K, C, R, S) filters; got shape ",
                    t.sizes());
  TORCH_CHECK_VALUE(t.scalar_type() == dtype, name, " has dtype ", t.scalar_type(), " but the kernel was built for ",
                    dtype);
  TORCH_CHECK_VALUE(t.device() == first.device(), name, " is on ", t.device(), " but input is on ", first.device(),
                    "; every tensor must be on input's device");
  TORCH_CHECK_VALUE(t.is_contiguous(at::MemoryFormat::ChannelsLast), name, " has shape ", t.sizes(), " and strides ",
                    t.strides(),
                    " but the kernel reads channels_last memory (NHWC / KRSC) in place; pass "
                    "x.contiguous(memory_format=torch.channels_last)");
  const auto address = t.is_meta() ? 0 : reinterpret_cast<std::uintptr_t>(t.data_ptr());
  TORCH_CHECK_VALUE(
      t.size(1) % alignment == 0 && address % static_cast<std::uintptr_t>(alignment * t.element_size()) == 0, name,
      " has ", t.size(1), " channels; its channel count and address must be multiples of ", alignment,
      " elements, the vectors the kernel reads; pad the channels or export a kernel with a "
      "smaller alignment");
}

// One (h, w) pair of the schema's int[2] arguments, each at least `least`.
std::array<int64_t, 2> pair(c10::IntArrayRef values, const char* name, int64_t least) {
  TORCH_CHECK_VALUE(values.size() == 2, name, " must be an int or a pair (h, w); got ", values);
  TORCH_CHECK_VALUE(values[0] >= least && values[1] >= least, name, " must be at least ", least, "; got ", values);
  return {values[0], values[1]};
}

// y = act(alpha * conv2d(x, w) + beta * C), cross-correlation as torch.nn.functional.conv2d (groups = 1).
at::Tensor run_conv2d(const Conv2dKernel& kernel, const at::Tensor& x, const at::Tensor& w,
                      const std::optional<at::Tensor>& C, c10::IntArrayRef stride_arg, c10::IntArrayRef padding_arg,
                      c10::IntArrayRef dilation_arg, double alpha, double beta, double activation_parameter) {
  TORCH_CHECK_VALUE(x.is_cuda() || x.is_meta(), "input is on ", x.device(), "; the kernel runs on CUDA tensors");
  check_channels_last(x, "input", kernel.input, kernel.alignment_input, x);
  check_channels_last(w, "weight", kernel.weight, kernel.alignment_weight, x);
  const auto stride = pair(stride_arg, "stride", 1), padding = pair(padding_arg, "padding", 0),
             dilation = pair(dilation_arg, "dilation", 1);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t k = w.size(0), r = w.size(2), s = w.size(3);
  TORCH_CHECK_VALUE(w.size(1) == c, "input has ", c, " channels but weight ", w.size(1),
                    "; the kernel computes groups = 1, where they are equal");
  const int64_t p = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) / stride[0] + 1;
  const int64_t q = (wd + 2 * padding[1] - dilation[1] * (s - 1) - 1) / stride[1] + 1;
  TORCH_CHECK_VALUE(p >= 1 && q >= 1, "the filter ", r, " x ", s, " (dilation ", dilation[0], " x ", dilation[1],
                    ") is larger than the padded input ", h + 2 * padding[0], " x ", wd + 2 * padding[1]);
  const bool c_given = C.has_value() && C->defined();
  TORCH_CHECK_VALUE(c_given || beta == 0.0, "beta is ", beta, " but no C was given; pass C or beta=0");
  if (c_given) {
    check_channels_last(*C, "C", kernel.output, kernel.alignment_output, x);
    TORCH_CHECK_VALUE(C->sizes() == at::IntArrayRef({n, k, p, q}), "C has shape ", C->sizes(), " but the output is (",
                      n, ", ", k, ", ", p, ", ", q, ")");
  }
  const std::vector<int64_t> sizes{n, k, p, q}, strides{p * q * k, 1, q * k, k};  // channels_last
  at::Tensor y = x.is_meta() ? x.new_empty_strided(sizes, strides, x.options().dtype(kernel.output))
                             : at::detail::empty_strided_cuda(sizes, strides, kernel.output, x.device());
  if (x.is_meta() || n == 0) return y;
  TORCH_CHECK_VALUE(k % kernel.alignment_output == 0, "weight has ", k, " filters: the output's channels must be a ",
                    "multiple of ", kernel.alignment_output, ", the vectors the kernel writes");
  for (const int64_t extent :
       {n, h, wd, c, k, r, s, p, q, padding[0], padding[1], stride[0], stride[1], dilation[0], dilation[1]}) {
    TORCH_CHECK_VALUE(extent <= INT32_MAX, "an extent or parameter of ", extent, " exceeds 2^31-1");
  }

  const int device = x.get_device();
  const DeviceGuard guard(device);
  gk_conv2d_args args{};
  args.n = static_cast<int32_t>(n), args.h = static_cast<int32_t>(h), args.w = static_cast<int32_t>(wd);
  args.c = static_cast<int32_t>(c), args.k = static_cast<int32_t>(k), args.r = static_cast<int32_t>(r);
  args.s = static_cast<int32_t>(s), args.p = static_cast<int32_t>(p), args.q = static_cast<int32_t>(q);
  args.pad_h = static_cast<int32_t>(padding[0]), args.pad_w = static_cast<int32_t>(padding[1]);
  args.stride_h = static_cast<int32_t>(stride[0]), args.stride_w = static_cast<int32_t>(stride[1]);
  args.dilation_h = static_cast<int32_t>(dilation[0]), args.dilation_w = static_cast<int32_t>(dilation[1]);
  args.split_k_slices = 1;
  args.A = x.data_ptr();
  args.B = w.data_ptr();
  args.C = c_given ? C->data_ptr() : nullptr;
  args.D = y.data_ptr();
  args.alpha = alpha;
  args.beta = beta;
  args.activation_params[0] = activation_parameter;
  args.device_id = device;

  const gk_torch_conv2d_entry_points& kernel_module = kernel.entry_points;
  const auto problem = [&] {
    return "input (" + std::to_string(n) + ", " + std::to_string(c) + ", " + std::to_string(h) + ", " +
           std::to_string(wd) + ") and weight (" + std::to_string(k) + ", " + std::to_string(c) + ", " +
           std::to_string(r) + ", " + std::to_string(s) + ")";
  };
  const int implementable = kernel_module.can_implement(&args);
  TORCH_CHECK_VALUE(implementable == GK_OK, "kernel ", kernel_module.kernel_name(), " cannot compute ", problem(), ": ",
                    status_text(implementable),
                    " (e.g. an optimized kernel takes filters of at most 32 x 32); export one for this problem");
  const int status = run_with_workspace(kernel_module, args, x, device);
  TORCH_CHECK(status == GK_OK, "kernel ", kernel_module.kernel_name(), " refused ", problem(), ": ",
              status_text(status));
  return y;
}

}  // namespace

extern "C" const char* gk_torch_register_conv2d_v1(const char* ns, const char* schema, const gk_torch_conv2d_kernel* k,
                                                   const gk_torch_conv2d_entry_points* entry_points) {
  return register_op(ns, schema, [&](torch::Library& library) {
    const Conv2dKernel kernel{scalar_type(k->input), scalar_type(k->weight), scalar_type(k->output), k->alignment_input,
                              k->alignment_weight,   k->alignment_output,    *entry_points};
    if (k->takes_slope) {
      library.impl("run", [kernel](const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& C,
                                   c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                   double alpha, double beta, double slope) {
        return run_conv2d(kernel, x, w, C, stride, padding, dilation, alpha, beta, slope);
      });
    } else {
      library.impl("run", [kernel](const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& C,
                                   c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                   double alpha, double beta) {
        return run_conv2d(kernel, x, w, C, stride, padding, dilation, alpha, beta, 0.0);
      });
    }
  });
}
