// include/gemmkit/conv2d.hpp: Conv2d, 2-D convolutions (fprop, dgrad, wgrad) as implicit GEMMs, NHWC activations and
// KRSC filters.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "gemmkit/errors.hpp"
#include "gemmkit/plan.hpp"

namespace gemmkit {

// What a Conv2d plan is declared from: the conv kind and the element types (per operand, else the generic one; the
// accumulator defaults to C's). Operands as the reference names them:
//   fprop: A = input x (N,H,W,C), B = weight w (K,R,S,C), C/D = output y (N,P,Q,K)
//   dgrad: A = grad_output dy (N,P,Q,K), B = weight w (K,R,S,C), C/D = grad_input dx (N,H,W,C)
//   wgrad: A = grad_output dy (N,P,Q,K), B = input x (N,H,W,C), C/D = grad_weight dw (K,R,S,C)
struct Conv2dOptions {
  ConvKind kind = ConvKind::Fprop;
  std::optional<DataType> element, element_a, element_b, element_c, element_d, element_accumulator;
  std::optional<int> cc;  // the target GPU; default: the current device's
  // 80: CUTLASS 2.x kernels (any SM80+ GPU); 90: CUTLASS 3.x kernels (SM90; the default there). See Conv2d.
  std::optional<int> kernel_cc;
};

// The geometry of one convolution besides the tensors' extents.
struct Conv2dGeometry {
  std::array<int, 2> stride{1, 1};    // (h, w), at least 1
  std::array<int, 2> padding{0, 0};   // zeros on each side, (h, w)
  std::array<int, 2> dilation{1, 1};  // (h, w), at least 1
};

// How a convolution's reduction is split: the mode and the slice count (1: not split, the direct kernel).
struct Conv2dSplitK {
  SplitKMode mode = SplitKMode::Serial;
  int slices = 1;
  bool operator==(const Conv2dSplitK&) const = default;
};

// A convolution plan: D = act(alpha * conv + beta * C), cross-correlation as torch.nn.functional.conv2d (groups = 1).
// Configured like a Gemm (opclass, tile descriptions, swizzle, activation, construct / compile); kernels come from
// the conv families, and the plan's kernel_cc(), spec().family and kernel names say which:
//   - kernel_cc 80 (Sm80Conv2d): CUTLASS 2.x implicit GEMM, on SM80 and SM90 GPUs: every dtype, SIMT, narrow channel
//     vectors, strided dgrad, serial split-K.
//   - kernel_cc 90 (Sm90Conv2d, the default on SM90): CUTLASS 3.x ConvUniversal with TMA im2col, TensorOp f16/bf16
//     (fprop, dgrad, wgrad) and tf32 (fprop). What only the 2.x kernels can run is served by them on a plan that was
//     not given kernel_cc, and said once on stderr: f32 dgrad/wgrad and opclass Simt (the whole plan: kernel_cc() 80),
//     iterator algorithms and swizzles (set on the plan: it moves to the 2.x kernels), and per problem strided dgrad,
//     split-K, channel counts that are not a multiple of a 16-byte vector, paddings or dilated filters beyond TMA
//     im2col's ranges (that problem runs a 2.x kernel; spec_for names it). Given kernel_cc=90 the plan is strict:
//     those are refused with a ConfigError or TensorError naming kernel_cc=80.
//     A 1x1 filter at unit stride without padding is a plain GEMM (fprop: N*H*W x K x C; dgrad: N*H*W x C x K;
//     wgrad: K x C x N*H*W), and so is a strided 1x1 fprop whose input height is stride_h * P (ResNet's
//     downsampling: a batch of Q GEMMs of N*P x K x C, interleaved in x and y). CUTLASS 4.2's SM90 conv kernel is
//     neither persistent nor split and has one consumer warp group: such problems run the SM90 GEMM family's kernel
//     (persistent, its run-time tile choice, split-K for a long wgrad), and spec_for names it
//     (cutlass3x_sm90_tensorop_gemm_...). A tile description set on the plan keeps the conv kernel.
// Tensors are 4-D, packed, channels innermost (NHWC / KRSC). Thread-safe like Gemm::run.
class Gemm;
class KernelModule;
namespace selection {
struct KernelChoices;
}

class Conv2d : public Plan {
 public:
  explicit Conv2d(const Conv2dOptions& options);
  ~Conv2d() override;
  Conv2d(Conv2d&&) noexcept;
  Conv2d& operator=(Conv2d&&) noexcept;

  ConvKind kind() const { return kind_; }

  // (N, P, Q, K) of an input (N,H,W,C) under a filter (K,R,S,C): P = (H + 2 pad_h - dil_h (R - 1) - 1) / stride_h + 1,
  // Q likewise. Throws ConfigError when the dilated filter is larger than the padded input or a value is invalid.
  static std::array<std::int64_t, 4> output_size(const std::array<std::int64_t, 4>& input_nhwc,
                                                 const std::array<std::int64_t, 4>& weight_krsc,
                                                 const Conv2dGeometry& geometry);

  // How the kernels walk their operands (kernel_cc 80 only). Unset (the default): construct() names the analytic
  // kernel and run() takes the optimized one whenever the problem allows it (filters of at most 32 x 32).
  const std::optional<IteratorAlgorithm>& iterator_algorithm() const;
  void set_iterator_algorithm(std::optional<IteratorAlgorithm> algorithm);
  // The 2.x kernels' threadblock swizzle by its stride (1, 2, 4 or 8; the reference's swizzling_stride): Identity<n>,
  // or for strided dgrad problems the strided-dgrad swizzle of that stride.
  int swizzling_stride() const { return swizzling_stride_; }
  void set_swizzling_stride(int stride);
  // Dgrad kernels: unit-stride only (Unity, faster) or any stride. Unset: construct() names the strided kernel and
  // run() picks by the problem's stride.
  const std::optional<StrideSupport>& stride_support() const;
  void set_stride_support(std::optional<StrideSupport> support);

  // Split-K (the reference's split_k = (mode, slices)): the reduction (R*S*C for fprop, R*S*K for dgrad, N*P*Q for
  // wgrad) in `slices` parts. Serial: one kernel, the parts add into D in turn (in D's type). Parallel: the parts
  // write partial sums in the accumulator type to a workspace (gemmkit's stream-ordered pool), then a reduction
  // kernel adds them and applies alpha, beta and the activation; its kernel is another module
  // (KernelSpec::split_k_mode), the slice count a run-time argument.
  // Unset (the default, split_k_mode() nullopt): run() splits wgrad problems whose output is under a wave of CTAs,
  // in parallel, into slices for about 4 waves (at least 8 steps of the tile's K each, partial sums moving no more
  // bytes than the operands; the tile chosen with them), and nothing else. set_split_k(mode, 0) fixes the mode and
  // lets run() choose the count so for any kind; set_split_k(mode, n) fixes both; set_split_k(std::nullopt) goes
  // back to the default. One slice runs unsplit (the direct kernel), whatever the mode. construct() and compile()
  // name the direct kernel.
  const std::optional<SplitKMode>& split_k_mode() const { return split_k_mode_; }
  int split_k_slices() const { return split_k_slices_; }  // 0: chosen per problem
  void set_split_k(std::optional<SplitKMode> mode, int slices = 0);

  // D = act(alpha * conv(A, B) + beta * C) (see Conv2dOptions for which tensor is which). Every tensor and the
  // problem size are checked first (TensorError / ConfigError naming what to change); nothing runs on error. C may
  // be null when beta == 0. Host tensors are staged through the GPU; a batch of 0 runs nothing.
  void run(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
           const Conv2dGeometry& geometry = {}, double alpha = 1.0, double beta = 0.0, const RunOptions& options = {});

  // The kernel run() would use for these tensors (the same checks; nothing runs; no GPU needed).
  KernelSpec spec_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                      const Conv2dGeometry& geometry = {}, double beta = 0.0);
  // The split run() would use for these tensors (the same checks; nothing runs; without a GPU, the SM count of
  // the plan's cc's flagship).
  Conv2dSplitK split_k_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                           const Conv2dGeometry& geometry = {}, double beta = 0.0);

 private:
  struct ConvProblem;
  // What run() launches for a problem: the kernel (a configuration of one list of choices) and the split.
  struct Launch {
    selection::KernelChoices* choices;
    std::size_t choice;
    Conv2dSplitK split;
  };
  ConvProblem check_conv(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                         const Conv2dGeometry& geometry, double beta) const;
  // The configurations for this problem's alignments, iterators and split-K mode; `stages` != 0: at that depth.
  selection::KernelChoices& conv_choices(const ConvProblem& problem, SplitKMode mode, int stages = 0);
  std::size_t choose(const selection::KernelChoices& choices, const ConvProblem& problem, int sm_count) const;
  Launch launch_for(const ConvProblem& problem, int sm_count);
  // The GEMM plan a pointwise problem runs as (see the class comment), else null.
  Gemm* pointwise_gemm(const ConvProblem& problem);
  // The conv's tensors as that GEMM's matrices.
  struct PointwiseOperands {
    TensorView a, b, d;
    std::optional<TensorView> c;
  };
  PointwiseOperands pointwise_operands(const ConvProblem& problem, const TensorView& A, const TensorView& B,
                                       const TensorView* C, const TensorView& D) const;

  // An unpinned SM90 plan moves to the CUTLASS 2.x kernels (kernel_cc 80) for `why`, dropping a tile set for SM90
  // kernels, and says so once; false (nothing changed) for a plan that is not SM90 or was given kernel_cc.
  bool move_to_cutlass2(const std::string& why);
  // The plan that runs this problem: this one, or for a problem only the 2.x kernels take on an unpinned SM90 plan,
  // its 2.x twin (made on first use, with this plan's settings; kept until the next change). Throws this plan's error
  // when neither takes it.
  Conv2d& plan_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                   const Conv2dGeometry& geometry, double beta);

  Conv2dOptions options_;
  ConvKind kind_;
  int swizzling_stride_ = 1;
  // What every spec of the plan adds (its iterators), shared with the spec hook of the plan's core.
  struct Settings {
    std::optional<IteratorAlgorithm> iterator;
    std::optional<StrideSupport> stride_support;
  };
  std::shared_ptr<Settings> settings_;
  struct Derived;
  std::unique_ptr<Derived> derived_;
  std::optional<SplitKMode> split_k_mode_;
  int split_k_slices_ = 0;
};

}  // namespace gemmkit
