// src/api/conv2d.cpp: the Conv2d plan: conv kind and iterators on top of Gemm's configuration, the problem-size
// rules (output size, groups = 1, alignment, the kernels' 32-bit limits), and run() as check -> choose -> launch.
#include "gemmkit/conv2d.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>

#include "api/conv_tensor_check.hpp"
#include "api/plan_internal.hpp"
#include "api/tensor_check.hpp"
#include "catalog/catalog.hpp"
#include "families/sm90_conv2d.hpp"
#include "gemmkit/errors.hpp"
#include "jit/kernel_loader.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/staging.hpp"
#include "runtime/workspace.hpp"
#include "util/notes.hpp"

namespace gemmkit {
namespace {

// SM90 fprop kernels whose implicit GEMM has at most this many steps of the tile's K run with this many stages.
constexpr std::int64_t kShallowPipelineKSteps = 12;
constexpr int kShallowPipelineStages = 4;

using detail::check_geometry;
using detail::check_packed;
using detail::Extent;
using detail::extent_text;
using detail::fitting_vector;
using detail::output_extent;
using detail::Roles;
using detail::roles;

GemmOptions gemm_options(const Conv2dOptions& o) {
  GemmOptions g;
  g.element = o.element;
  g.element_a = o.element_a;
  g.element_b = o.element_b;
  g.element_c = o.element_c;
  g.element_d = o.element_d;
  g.element_accumulator = o.element_accumulator;
  g.layout = Layout::RowMajor;  // NHWC and KRSC: channels innermost, as the kernels' row-major implicit GEMM reads
  g.cc = o.cc;
  g.kernel_cc = o.kernel_cc;
  return g;
}

runtime::LaunchOperand launch_operand(const TensorView& t, DataType type) {
  runtime::LaunchOperand o;
  o.data = t.data;
  o.on_device = t.on_device();
  o.element_bytes = bits_of(type) / 8;
  o.span = t.numel();
  o.ld = 0;
  return o;
}

// A 1x1 convolution of each kind as a GEMM: fprop y = x w^T, dgrad dx = dy w, wgrad dw = dy^T x, with activations
// as (N*H*W) x channels row-major matrices and the K x C filter row-major. Each operand's extents and layout, A, B, D.
struct PointwiseMatrix {
  std::int64_t rows, cols;
  Layout layout;
};
std::array<PointwiseMatrix, 3> pointwise_matrices(ConvKind kind, std::int64_t pixels, std::int64_t c, std::int64_t k) {
  constexpr Layout row = Layout::RowMajor, col = Layout::ColumnMajor;
  switch (kind) {
    case ConvKind::Fprop: return {{{pixels, c, row}, {c, k, col}, {pixels, k, row}}};
    case ConvKind::Dgrad: return {{{pixels, k, row}, {k, c, row}, {pixels, c, row}}};
    case ConvKind::Wgrad: return {{{k, pixels, col}, {pixels, c, row}, {k, c, row}}};
  }
  return {};
}

// A pointwise convolution's operand as the GEMM reads it: a packed NHWC / KRSC tensor as that matrix.
TensorView matrix(const TensorView& t, const PointwiseMatrix& m) {
  const bool row_major = m.layout == Layout::RowMajor;
  return TensorView::strided(t.data, t.dtype, {m.rows, m.cols}, {row_major ? m.cols : 1, row_major ? 1 : m.rows},
                             t.device);
}

}  // namespace

// One checked convolution: its sizes, the vectors its tensors allow and the iterators it runs with.
struct Conv2d::ConvProblem {
  std::int64_t n = 0, h = 0, w = 0, c = 0, k = 0, r = 0, s = 0, p = 0, q = 0;
  Conv2dGeometry geometry;
  int alignment_a = 0, alignment_b = 0, alignment_c = 0;
  IteratorAlgorithm iterator = IteratorAlgorithm::Analytic;
  StrideSupport stride_support = StrideSupport::Strided;

  // A 1x1 filter without padding runs as a GEMM on the same tensors (see Conv2d's class comment): at unit stride, and
  // a strided fprop whose input rows are the sampled rows' stride apart (H = stride_h * P) as a batch over q.
  bool runs_as_gemm(ConvKind kind) const {
    if (r != 1 || s != 1 || geometry.padding != std::array{0, 0}) return false;
    return unit_stride() || (kind == ConvKind::Fprop && h == geometry.stride[0] * p);
  }
  bool unit_stride() const { return geometry.stride == std::array{1, 1}; }

  // The implicit GEMM's extents.
  catalog::ProblemShape gemm(ConvKind kind) const {
    switch (kind) {
      case ConvKind::Fprop: return {n * p * q, k, r * s * c, 1};
      case ConvKind::Dgrad: return {n * h * w, c, r * s * k, 1};
      case ConvKind::Wgrad: return {k, r * s * c, n * p * q, 1};
    }
    return {};
  }
};

// The plan's own twins and pointwise GEMMs, and the configuration generation they were made for.
struct Conv2d::Derived {
  std::mutex mutex;
  std::uint64_t generation = 0;
  std::unique_ptr<Conv2d> cutlass2_twin;
  // The GEMM plan a 1x1, unit-stride, unpadded convolution runs as, one per leaky_relu slope (a run-time value the
  // GEMM plan holds).
  std::vector<std::pair<double, std::unique_ptr<Gemm>>> pointwise;

  // Drops what was made for an older configuration; call under the mutex.
  void keep_to(std::uint64_t now) {
    if (generation == now) return;
    cutlass2_twin.reset();
    pointwise.clear();
    generation = now;
  }
};

Conv2d::Conv2d(const Conv2dOptions& options)
    : Plan(gemm_options(options), catalog::Operation::Conv2d),
      options_(options),
      kind_(options.kind),
      settings_(std::make_shared<Settings>()),
      derived_(std::make_unique<Derived>()) {
  core_->complete_spec = [kind = kind_, settings = settings_](KernelSpec& spec) {
    spec.conv = ConvKernel{kind, settings->iterator.value_or(IteratorAlgorithm::Analytic),
                           settings->stride_support.value_or(StrideSupport::Strided)};
  };
  core_->invalidate();
  // What SM90 kernels lack for these types and this kind (tf32 dgrad, wgrad): the 2.x kernels, unless kernel_cc=90
  // was asked for (then refused now, naming kernel_cc=80).
  if (core_->cache().kernel_cc != 90) return;
  try {
    (void)spec();
  } catch (const ConfigError&) {
    if (!move_to_cutlass2(std::string(to_string(core_->config.types.a)) + " " + std::string(to_string(kind_)) +
                          " has no SM90 conv kernel")) {
      throw;
    }
  }
}

Conv2d::~Conv2d() = default;
Conv2d::Conv2d(Conv2d&&) noexcept = default;
Conv2d& Conv2d::operator=(Conv2d&&) noexcept = default;

const std::optional<IteratorAlgorithm>& Conv2d::iterator_algorithm() const {
  return settings_->iterator;
}

const std::optional<StrideSupport>& Conv2d::stride_support() const {
  return settings_->stride_support;
}

bool Conv2d::move_to_cutlass2(const std::string& why) {
  if (core_->cache().kernel_cc != 90 || options_.kernel_cc) return false;
  core_->config.kernel_cc = 80;
  core_->config.tile.reset();  // an SM90 configuration means nothing to the 2.x kernels
  core_->invalidate();
  note_once(why + ": this SM" + std::to_string(core_->config.cc) +
            " Conv2d plan uses the CUTLASS 2.x conv kernels (kernel_cc 80). Pass kernel_cc=80 to choose them "
            "explicitly, or kernel_cc=90 to have such settings refused.");
  return true;
}

void Conv2d::set_swizzling_stride(int stride) {
  const Swizzle swizzles[] = {Swizzle::Identity1, Swizzle::Identity2, Swizzle::Identity4, Swizzle::Identity8};
  const int index = stride == 1 ? 0 : stride == 2 ? 1 : stride == 4 ? 2 : stride == 8 ? 3 : -1;
  if (index < 0) {
    throw ConfigError("swizzling_stride must be 1, 2, 4 or 8 (IdentitySwizzle<n>); got " + std::to_string(stride) +
                      ".");
  }
  if (stride != 1) move_to_cutlass2("a threadblock swizzle stride was set");  // the SM90 conv kernels have no swizzle
  set_swizzling_functor(swizzles[index]);
  swizzling_stride_ = stride;
}

Conv2d& Conv2d::plan_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                         const Conv2dGeometry& g, double beta) {
  auto twin = [&]() -> Conv2d& {
    std::lock_guard<std::mutex> lock(derived_->mutex);
    derived_->keep_to(core_->generation());
    if (!derived_->cutlass2_twin) {
      Conv2dOptions o = options_;
      o.kernel_cc = 80;
      auto plan = std::make_unique<Conv2d>(o);
      plan->set_activation(activation(), activation_parameter());
      plan->set_stride_support(settings_->stride_support);
      plan->set_split_k(split_k_mode_, split_k_slices_);
      derived_->cutlass2_twin = std::move(plan);
    }
    Conv2d& plan = *derived_->cutlass2_twin;
    // The slope and split-K are run-time settings; the others move the configuration's generation, and the twin.
    if (plan.activation_parameter() != activation_parameter())
      plan.set_activation(activation(), activation_parameter());
    if (plan.split_k_mode_ != split_k_mode_ || plan.split_k_slices_ != split_k_slices_) {
      plan.set_split_k(split_k_mode_, split_k_slices_);
    }
    return plan;
  };
  const bool may_use_twin = core_->cache().kernel_cc == 90 && !options_.kernel_cc && !tile_description();
  Conv2d& plan = plan_taking(
      *this, may_use_twin, [&](Conv2d& p) { (void)p.check_conv(A, B, C, D, g, beta); }, twin);
  if (&plan != this) {
    note_once("a " + std::string(to_string(kind_)) +
              " problem the SM90 conv kernels cannot run (e.g. a stride above 1 for dgrad, split-K, narrow channels) "
              "runs on the CUTLASS 2.x conv kernels; pass kernel_cc=90 to have it refused instead.");
  }
  return plan;
}

std::array<std::int64_t, 4> Conv2d::output_size(const Extent& x, const Extent& w, const Conv2dGeometry& g) {
  check_geometry(g);
  if (x[3] != w[3]) {
    throw ConfigError("Conv2d: the input has " + std::to_string(x[3]) + " channels but the weight " +
                      std::to_string(w[3]) + "; gemmkit computes groups = 1 only, where they are equal.");
  }
  const std::int64_t p = output_extent(x[1], w[1], g.padding[0], g.stride[0], g.dilation[0]);
  const std::int64_t q = output_extent(x[2], w[2], g.padding[1], g.stride[1], g.dilation[1]);
  if (p < 1 || q < 1) {
    throw ConfigError("Conv2d: the filter " + std::to_string(w[1]) + " x " + std::to_string(w[2]) + " (dilation " +
                      std::to_string(g.dilation[0]) + " x " + std::to_string(g.dilation[1]) +
                      ") is larger than the padded input " + std::to_string(x[1] + 2 * g.padding[0]) + " x " +
                      std::to_string(x[2] + 2 * g.padding[1]) +
                      ": the output would be empty. Pad more or use a "
                      "smaller filter or dilation.");
  }
  return {x[0], p, q, w[0]};
}

void Conv2d::set_iterator_algorithm(std::optional<IteratorAlgorithm> algorithm) {
  if (algorithm) move_to_cutlass2("an iterator algorithm was set");  // the SM90 conv kernels have none (TMA im2col)
  change_checked(settings_->iterator, algorithm);
}

void Conv2d::set_stride_support(std::optional<StrideSupport> support) {
  if (support == StrideSupport::Unity && kind_ != ConvKind::Dgrad) {
    throw ConfigError("Stride support 'unity' selects the unit-stride dgrad kernels; " + std::string(to_string(kind_)) +
                      " kernels take any stride.");
  }
  change_checked(settings_->stride_support, support);
}

void Conv2d::set_split_k(std::optional<SplitKMode> mode, int slices) {
  if (slices < 0 || slices > catalog::kMaxSplitKSlices) {
    throw ConfigError("split_k_slices must be between 1 and " + std::to_string(catalog::kMaxSplitKSlices) +
                      " (the grid's z extent), or 0 to let run() choose; got " + std::to_string(slices) + ".");
  }
  if (!mode && slices != 0) {
    throw ConfigError("split_k_slices " + std::to_string(slices) +
                      " needs a split_k_mode (serial or parallel); without one run() chooses both.");
  }
  split_k_mode_ = mode;
  split_k_slices_ = slices;
}

Conv2d::ConvProblem Conv2d::check_conv(const TensorView& A, const TensorView& B, const TensorView* C,
                                       const TensorView& D, const Conv2dGeometry& g, double beta) const {
  const Roles role = roles(kind_);
  const Extent a = check_packed(A, role.a, core_->config.types.a);
  const Extent b = check_packed(B, role.b, core_->config.types.b);
  const Extent d = check_packed(D, role.d, core_->config.types.d);
  if (C != nullptr) {
    const Extent c = check_packed(*C, "C", core_->config.types.c);
    if (c != d) {
      throw TensorError("Tensor C has extents " + extent_text(c) + " but " + std::string(role.d) + " has " +
                        extent_text(d) + "; they must be equal.");
    }
  } else if (beta != 0.0) {
    throw TensorError("Tensor C: beta is " + std::to_string(beta) + " but no C was given; pass C or set beta = 0.");
  }
  // The input x and filter w as each kind holds them; the output y is checked against the size formula.
  Extent x{}, w{}, y{};
  const char* y_name = "";
  switch (kind_) {
    case ConvKind::Fprop: x = a, w = b, y = d, y_name = role.d; break;
    case ConvKind::Dgrad: x = d, w = b, y = a, y_name = role.a; break;
    case ConvKind::Wgrad: x = b, w = d, y = a, y_name = role.a; break;
  }
  const Extent expected = output_size(x, w, g);
  if (y != expected) {
    throw TensorError("Tensor " + std::string(y_name) + " has extents " + extent_text(y) +
                      " but the convolution of an input " + extent_text(x) + " with a filter " + extent_text(w) +
                      " (stride " + std::to_string(g.stride[0]) + "x" + std::to_string(g.stride[1]) + ", padding " +
                      std::to_string(g.padding[0]) + "x" + std::to_string(g.padding[1]) + ", dilation " +
                      std::to_string(g.dilation[0]) + "x" + std::to_string(g.dilation[1]) + ") gives " +
                      extent_text(expected) + " (P = (H + 2 pad - dilation (R - 1) - 1) / stride + 1).");
  }
  ConvProblem p;
  p.n = x[0], p.h = x[1], p.w = x[2], p.c = x[3], p.k = w[0], p.r = w[1], p.s = w[2], p.p = y[1], p.q = y[2];
  p.geometry = g;
  const std::int64_t extents[] = {p.n, p.h, p.w, p.c, p.k, p.r, p.s};
  for (std::int64_t e : extents) {
    if (e > INT32_MAX) throw TensorError("Conv2d: an extent of " + std::to_string(e) + " exceeds 2^31-1; split it.");
  }
  // CUTLASS 2.x convs address activations with 32-bit offsets (its can_implement's rule).
  for (const auto& [extent, type, name] :
       {std::tuple{x, kind_ == ConvKind::Dgrad ? core_->config.types.d : core_->config.types.a, "input"},
        {y, kind_ == ConvKind::Fprop ? core_->config.types.d : core_->config.types.a, "output"}}) {
    const std::int64_t bytes = extent[0] * extent[1] * extent[2] * extent[3] * (bits_of(type) / 8);
    if (bytes >= (std::int64_t{1} << 31)) {
      throw TensorError(std::string("Conv2d: the ") + name + " activation holds " + std::to_string(bytes) +
                        " bytes, over the 2 GiB the conv kernels address; split the batch.");
    }
  }
  const bool sm90 = core_->cache().kernel_cc == 90;
  if (sm90) {
    families::ConvExtents e;
    e.h = static_cast<int>(p.h), e.w = static_cast<int>(p.w), e.r = static_cast<int>(p.r);
    e.s = static_cast<int>(p.s), e.p = static_cast<int>(p.p), e.q = static_cast<int>(p.q);
    e.stride = g.stride, e.padding = g.padding, e.dilation = g.dilation;
    e.split_k_slices = split_k_slices_;
    families::check_sm90_conv_problem(kind_, e);
  }
  // The widest vectors the channel counts and addresses allow.
  auto fit = [&](const TensorView& t, std::int64_t channels, DataType type, const std::vector<int>& candidates,
                 const std::string& name) {
    if (const int v = fitting_vector(t.data, channels, type, candidates)) return v;
    const std::string narrowest = std::to_string(candidates.back());
    throw TensorError(
        "Tensor " + name + ": its " + std::to_string(channels) + " channels or its address are not a multiple of " +
        narrowest + " elements, the narrowest vector " +
        (sm90 ? std::string("SM90 conv kernels (TMA)")
              : std::string(to_string(core_->config.opclass)) + " conv kernels") +
        " for " + std::string(to_string(type)) + " read. Pad the channels to a multiple of " + narrowest +
        (sm90 ? ", or pass kernel_cc=80 for the CUTLASS 2.x kernels (narrower vectors, and SIMT f32 for any "
                "channel count)."
              : ", or use f32 with opclass = Simt (any channel count)."));
  };
  p.alignment_a = fit(A, a[3], core_->config.types.a, core_->cache().alignments_a, role.a);
  p.alignment_b = fit(B, b[3], core_->config.types.b, core_->cache().alignments_b, role.b);
  p.alignment_c = fit(D, d[3], core_->config.types.d, core_->cache().alignments_c, role.d);
  if (C != nullptr) {
    p.alignment_c = std::min(p.alignment_c, fit(*C, d[3], core_->config.types.c, core_->cache().alignments_c, "C"));
  }
  if (sm90) return p;  // TMA im2col kernels: no iterators, no stride support, no split-K (checked above)
  // Optimized iterators precompute masks for filters of at most 32 x 32 (channel counts already fit the vectors).
  const bool optimized_ok = p.r <= 32 && p.s <= 32;
  if (settings_->iterator == IteratorAlgorithm::Optimized && !optimized_ok) {
    throw ConfigError("Iterator algorithm optimized is invalid for this problem: its filter is " + std::to_string(p.r) +
                      " x " + std::to_string(p.s) +
                      ", over the 32 x 32 the optimized iterators take. Set the iterator algorithm to analytic.");
  }
  p.iterator = settings_->iterator.value_or(optimized_ok ? IteratorAlgorithm::Optimized : IteratorAlgorithm::Analytic);
  const bool unit_stride = g.stride[0] == 1 && g.stride[1] == 1;
  if (kind_ == ConvKind::Dgrad && !unit_stride && (g.dilation[0] != 1 || g.dilation[1] != 1)) {
    throw ConfigError(
        "Conv2d dgrad with a stride above 1 takes dilation 1 only (CUTLASS's strided dgrad kernels do "
        "not dilate); got stride " +
        std::to_string(g.stride[0]) + "x" + std::to_string(g.stride[1]) + " and dilation " +
        std::to_string(g.dilation[0]) + "x" + std::to_string(g.dilation[1]) + ".");
  }
  if (settings_->stride_support == StrideSupport::Unity && !unit_stride) {
    throw ConfigError("Stride support unity is invalid for this problem: its stride is " + std::to_string(g.stride[0]) +
                      "x" + std::to_string(g.stride[1]) + ". Set the stride support to strided (or unset it).");
  }
  if (kind_ == ConvKind::Dgrad && !unit_stride && split_k_slices_ > 1) {
    throw ConfigError(
        "Conv2d dgrad with a stride above 1 has no split-K (CUTLASS's strided dgrad kernels); set "
        "split_k_slices to 1 for this problem.");
  }
  p.stride_support = settings_->stride_support.value_or(
      kind_ == ConvKind::Dgrad && unit_stride ? StrideSupport::Unity : StrideSupport::Strided);
  return p;
}

selection::KernelChoices& Conv2d::conv_choices(const ConvProblem& p, SplitKMode mode, int stages) {
  selection::ProblemKey key;
  key.alignment_a = p.alignment_a;
  key.alignment_b = p.alignment_b;
  key.alignment_c = p.alignment_c;
  const selection::SpecVariant variant{p.iterator, p.stride_support, mode, stages};
  return core_->choices_for(key, &variant);
}

std::size_t Conv2d::choose(const selection::KernelChoices& choices, const ConvProblem& p, int sm_count) const {
  if (tile_description()) return 0;
  return catalog::choose_tile(choices.tiles, choices.base, p.gemm(kind_), sm_count);
}

Conv2d::Launch Conv2d::launch_for(const ConvProblem& p, int sm_count) {
  selection::KernelChoices& direct = conv_choices(p, SplitKMode::Serial);
  std::size_t choice = choose(direct, p, sm_count);
  // By default only wgrad splits (its K = N*P*Q is long, its output small); SM90's TMA im2col kernels never do (a
  // forced count was refused by check_conv).
  const bool sm90 = core_->cache().kernel_cc == 90;
  if (sm90 && kind_ == ConvKind::Fprop && !tile_description()) {
    // A short reduction (res2's 3x3 64 -> 64: 9 steps of the 128 x 64 tile's K) gains from 4 stages over as many as
    // fit: two CTAs per SM overlap one's prologue and epilogue with the other's MMAs; longer reductions need the deep
    // pipeline more than a second CTA. Fprop only: the other kinds were not timed with fewer stages.
    const std::int64_t tile_k = direct.tiles[choice].threadblock_shape[2];
    if ((p.gemm(kind_).k + tile_k - 1) / tile_k <= kShallowPipelineKSteps) {
      return {&conv_choices(p, SplitKMode::Serial, kShallowPipelineStages), choice, {}};
    }
  }
  int slices = !sm90 && (split_k_mode_ || kind_ == ConvKind::Wgrad) ? split_k_slices_ : 1;
  if (slices == 0 && kind_ == ConvKind::Dgrad && p.stride_support == StrideSupport::Strided) {
    slices = 1;              // strided dgrad kernels: no parallel split-K kernel, no split at all above stride 1
  } else if (slices == 0) {  // the count is run()'s to choose, and with it the tile when the plan has none
    const catalog::ProblemShape gemm = p.gemm(kind_);
    const catalog::SplitChoice best = catalog::choose_split_k_tile(direct.tiles, gemm, sm_count);
    slices = best.slices;
    if (slices > 1) choice = best.tile;  // unsplit, the usual pick stands
  }
  if (slices <= 1) return {&direct, choice, {}};  // unsplit: the direct kernel, whatever the mode
  const SplitKMode mode = split_k_mode_.value_or(SplitKMode::Parallel);
  if (mode == SplitKMode::Serial) return {&direct, choice, {mode, slices}};
  // The same configurations with the partial-sums epilogue and the reduction kernel.
  selection::KernelChoices& parallel = conv_choices(p, SplitKMode::Parallel);
  return {&parallel, choice, {mode, slices}};
}

Gemm* Conv2d::pointwise_gemm(const ConvProblem& p) {
  if (!p.runs_as_gemm(kind_) || core_->cache().kernel_cc != 90 || tile_description()) return nullptr;
  const double slope = activation_parameter();
  std::lock_guard<std::mutex> lock(derived_->mutex);
  derived_->keep_to(core_->generation());
  for (const auto& [parameter, gemm] : derived_->pointwise) {
    if (parameter == slope) return gemm.get();
  }
  const auto [a, b, d] = pointwise_matrices(kind_, p.n * p.h * p.w, p.c, p.k);
  GemmOptions o;
  o.element_a = core_->config.types.a, o.element_b = core_->config.types.b, o.element_c = core_->config.types.c,
  o.element_d = core_->config.types.d;
  o.element_accumulator = core_->config.types.accumulator;
  o.layout_a = a.layout, o.layout_b = b.layout, o.layout_c = d.layout;
  o.cc = core_->config.cc;
  o.kernel_cc = 90;
  std::unique_ptr<Gemm> gemm;
  try {
    const jit::NoBuildAhead internal;
    gemm = std::make_unique<Gemm>(o);
    gemm->set_activation(activation(), slope);
  } catch (const ConfigError&) {
    gemm.reset();  // no GEMM kernel for these types: the conv kernel runs the problem
  }
  return derived_->pointwise.emplace_back(slope, std::move(gemm)).second.get();
}

Conv2d::PointwiseOperands Conv2d::pointwise_operands(const ConvProblem& p, const TensorView& A, const TensorView& B,
                                                     const TensorView* C, const TensorView& D) const {
  const auto [a, b, d] = pointwise_matrices(kind_, p.n * p.h * p.w, p.c, p.k);
  if (p.unit_stride()) {
    PointwiseOperands out{matrix(A, a), matrix(B, b), matrix(D, d), std::nullopt};
    if (C != nullptr) out.c = matrix(*C, d);
    return out;
  }
  // Strided fprop: output pixel (n, p, q) reads input pixel (n, stride_h p, stride_w q). With H = stride_h * P the
  // rows (n, p) are one stride apart in both x and y, so q is the batch: x as Q matrices of (N*P) x C, y as Q of
  // (N*P) x K, interleaved (batch strides stride_w * C and K).
  const std::int64_t rows = p.n * p.p;
  const std::int64_t x_row = p.geometry.stride[0] * p.w * p.c, x_batch = p.geometry.stride[1] * p.c;
  auto output = [&](const TensorView& t) {
    return TensorView::strided(t.data, t.dtype, {p.q, rows, p.k}, {p.k, p.q * p.k, 1}, t.device);
  };
  PointwiseOperands out{TensorView::strided(A.data, A.dtype, {p.q, rows, p.c}, {x_batch, x_row, 1}, A.device),
                        matrix(B, b), output(D), std::nullopt};
  if (C != nullptr) out.c = output(*C);
  return out;
}

KernelSpec Conv2d::spec_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                            const Conv2dGeometry& geometry, double beta) {
  if (Conv2d& plan = plan_for(A, B, C, D, geometry, beta); &plan != this) {
    return plan.spec_for(A, B, C, D, geometry, beta);
  }
  const ConvProblem p = check_conv(A, B, C, D, geometry, beta);
  if (Gemm* gemm = pointwise_gemm(p)) {
    const PointwiseOperands o = pointwise_operands(p, A, B, C, D);
    return gemm->spec_for(o.a, o.b, o.c ? &*o.c : nullptr, o.d, beta);
  }
  const Launch launch = launch_for(p, core_->sm_count_for_choice());
  return launch.choices->spec(launch.choice);
}

Conv2dSplitK Conv2d::split_k_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                                 const Conv2dGeometry& geometry, double beta) {
  if (Conv2d& plan = plan_for(A, B, C, D, geometry, beta); &plan != this) {
    return plan.split_k_for(A, B, C, D, geometry, beta);
  }
  const ConvProblem p = check_conv(A, B, C, D, geometry, beta);
  if (pointwise_gemm(p) != nullptr) return {};  // the GEMM's split-K is its own (Gemm::k_split_for)
  return launch_for(p, core_->sm_count_for_choice()).split;
}

void Conv2d::run(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                 const Conv2dGeometry& geometry, double alpha, double beta, const RunOptions& options) {
  if (Conv2d& plan = plan_for(A, B, C, D, geometry, beta); &plan != this) {
    plan.run(A, B, C, D, geometry, alpha, beta, options);
    return;
  }
  const ConvProblem p = check_conv(A, B, C, D, geometry, beta);
  if (options.bias != nullptr) {
    throw TensorError("Tensor bias: Conv2d kernels have no bias epilogue; pass it as C (broadcast) with beta = 1.");
  }
  const int device = current_device();
  for (const auto& [tensor, name] : {std::pair{&A, "A"}, {&B, "B"}, {&D, "D"}, {C, "C"}}) {
    if (tensor != nullptr && tensor->on_device() && tensor->device != device) {
      throw TensorError(std::string("Tensor ") + name + " lives on CUDA device " + std::to_string(tensor->device) +
                        " but the current device is " + std::to_string(device) +
                        "; call cudaSetDevice first or move the tensor.");
    }
  }
  if (p.n == 0) return;                  // an empty batch: nothing to compute, nothing to write
  if (Gemm* gemm = pointwise_gemm(p)) {  // its run() checks the staging
    const PointwiseOperands o = pointwise_operands(p, A, B, C, D);
    gemm->run(o.a, o.b, o.c ? &*o.c : nullptr, o.d, alpha, beta, options);
    return;
  }
  const bool any_host = !A.on_device() || !B.on_device() || !D.on_device() || (C != nullptr && !C->on_device());
  runtime::refuse_staging_under_capture(any_host, options.stream);

  const Launch launch = launch_for(p, device_info(device).sm_count);
  if (options.print_module) std::fputs(render(launch.choices->spec(launch.choice)).text.c_str(), stdout);
  KernelModule& module = core_->module_for(*launch.choices, launch.choice, options.wait_for_best);
  runtime::Staging staging(options.stream);
  const runtime::LaunchOperand d = launch_operand(D, core_->config.types.d);
  gk_conv2d_args args{};
  args.n = static_cast<int32_t>(p.n), args.h = static_cast<int32_t>(p.h), args.w = static_cast<int32_t>(p.w);
  args.c = static_cast<int32_t>(p.c), args.k = static_cast<int32_t>(p.k), args.r = static_cast<int32_t>(p.r);
  args.s = static_cast<int32_t>(p.s), args.p = static_cast<int32_t>(p.p), args.q = static_cast<int32_t>(p.q);
  args.pad_h = geometry.padding[0], args.pad_w = geometry.padding[1];
  args.stride_h = geometry.stride[0], args.stride_w = geometry.stride[1];
  args.dilation_h = geometry.dilation[0], args.dilation_w = geometry.dilation[1];
  args.split_k_slices = launch.split.slices;
  args.A = staging.on_device(launch_operand(A, core_->config.types.a));
  args.B = staging.on_device(launch_operand(B, core_->config.types.b));
  args.D = staging.on_device(d, /*copy_in=*/false);  // packed: the kernel writes every element
  if (C != nullptr) args.C = staging.on_device(launch_operand(*C, core_->config.types.c));
  args.alpha = alpha;
  args.beta = beta;
  args.activation_params[0] = activation_parameter();
  args.device_id = device;
  module.conv2d_run(args, options.stream);
  if (!D.on_device()) staging.copy_back(d, args.D);
  if (any_host || (options.sync && !runtime::is_capturing(options.stream))) {
    GK_CUDA_CHECK(cudaStreamSynchronize(options.stream));
  }
}

}  // namespace gemmkit
