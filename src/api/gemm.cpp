// src/api/gemm.cpp: the Gemm plan: its epilogue vectors and split-K settings, the problem check, and run() as
// check -> choose (selection/) -> launch.
#include "gemmkit/gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "api/plan_internal.hpp"
#include "api/tensor_check.hpp"
#include "api/visitor_args.hpp"
#include "catalog/catalog.hpp"
#include "families/rules.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/errors.hpp"
#include "jit/kernel_loader.hpp"
#include "runtime/kernel_module.hpp"
#include "runtime/launch.hpp"
#include "util/notes.hpp"

namespace gemmkit {

// A plan made from this one on first use (the twin of scalar loads, the tree twin), and made again once this one's
// configuration has changed (its generation).
struct DerivedPlan {
  std::uint64_t generation = 0;
  std::unique_ptr<Gemm> plan;

  template <class Make>
  Gemm& get(std::uint64_t current, const Make& make) {
    if (!plan || generation != current) {
      plan = make();
      generation = current;
    }
    return *plan;
  }
};

struct Gemm::Twin {
  std::mutex mutex;
  DerivedPlan scalar, tree;
  // The twin of scalar loads has taken a problem: operands that fit no vector come again, so run() checks it first.
  std::atomic<bool> scalar_taken{false};
};

Gemm::Gemm(const GemmOptions& o) : Plan(o, catalog::Operation::Gemm), twin_(std::make_unique<Twin>()) {
  jit::build_ahead([this] { return spec(); });
}
Gemm::Gemm(std::unique_ptr<selection::PlanCore> core) : Plan(std::move(core)), twin_(std::make_unique<Twin>()) {}
Gemm::~Gemm() = default;
Gemm::Gemm(Gemm&&) noexcept = default;
Gemm& Gemm::operator=(Gemm&&) noexcept = default;

BiasMode Gemm::bias() const {
  return core_->config.bias;
}
ScaleMode Gemm::scale() const {
  return core_->config.scale;
}
RasterOrder Gemm::raster_order() const {
  return core_->config.raster_order;
}
int Gemm::max_swizzle_size() const {
  return core_->config.max_swizzle_size;
}
Decomposition Gemm::decomposition() const {
  return core_->config.decomposition;
}
int Gemm::split_k_slices() const {
  return core_->config.splits;
}
ReductionMode Gemm::reduction_mode() const {
  return core_->config.reduction_mode;
}

const std::optional<epilogue::Epilogue>& Gemm::epilogue_visitor() const {
  return core_->config.visitor;
}

void Gemm::set_epilogue_visitor(std::optional<epilogue::Epilogue> tree) {
  const selection::PlanConfig& c = core_->config;
  const bool settings_were_the_trees = c.visitor_plain.has_value();
  const std::optional<epilogue::PlainForm> plain = tree ? epilogue::plain_form(*tree, c.types.c) : std::nullopt;
  if (plain && !settings_were_the_trees &&
      (c.activation != Activation::Identity || c.bias != BiasMode::None || c.scale != ScaleMode::None)) {
    throw ConfigError(
        "an epilogue visitor tree replaces the activation, bias and scale vectors; put them into the tree instead.");
  }
  // The plan keeps `tree`, run by the kernel of the settings `as_plain` stands for, or else by the tree's own kernel.
  auto keep = [&](const std::optional<epilogue::PlainForm>& as_plain) {
    selection::PlanConfig next = c;
    next.visitor = tree;
    next.visitor_plain = as_plain;
    if (as_plain) {
      next.activation = as_plain->activation;
      next.activation_parameter = as_plain->activation_parameter;
      next.bias = as_plain->bias;
      next.scale = as_plain->scale;
    } else if (settings_were_the_trees) {
      next.activation = Activation::Identity;
      next.bias = BiasMode::None;
      next.scale = ScaleMode::None;
    }
    assign_checked(core_->config, next, [&] { (void)spec(); });
    core_->invalidate();
  };
  if (plain) {
    try {
      keep(plain);
      return;
    } catch (const ConfigError&) {
      // No fused kernel of those settings for this plan (a 2.x kernel's bias runs along D's rows only): the tree's
      // own kernel serves it.
    }
  }
  if (tree && core_->cache().transposed) {
    throw ConfigError(
        "An epilogue visitor tree needs a kernel that computes D itself; this plan's (f32 A and B, both "
        "row-major) computes D^T. Make B column-major.");
  }
  keep(std::nullopt);
}

epilogue::Epilogue Gemm::epilogue() const {
  const selection::PlanConfig& c = core_->config;
  if (c.visitor) return *c.visitor;
  return epilogue::plain_epilogue(c.activation, c.bias, c.scale, c.activation_parameter);
}

void Gemm::set_bias(BiasMode bias) {
  core_->refuse_beside_plain_tree(bias != core_->config.bias, "bias");
  change_checked(core_->config.bias, bias);
}

bool Gemm::activation_at_launch() const {
  return core_->config.takes_activation_at_launch();
}

void Gemm::set_activation_at_launch(bool at_launch) {
  change_checked(core_->config.activation_at_launch, std::optional<bool>(at_launch));
}

BlockScaling Gemm::block_scaling() const {
  return core_->config.block_scaling;
}

void Gemm::set_block_scaling(BlockScaling scaling) {
  change_checked(core_->config.block_scaling, scaling);
}

void Gemm::set_scale(ScaleMode scale) {
  core_->refuse_beside_plain_tree(scale != core_->config.scale, "scale vectors");
  change_checked(core_->config.scale, scale);
}

void Gemm::set_raster_order(RasterOrder order) {
  if (order != RasterOrder::Heuristic && !catalog::family_of(spec().family).has_persistent_scheduler()) {
    throw ConfigError(
        "Raster order applies to SM90 persistent tile schedulers; this plan uses CUTLASS 2.x kernels. "
        "Use swizzle = IdentitySwizzle2/4/8 instead.");
  }
  core_->config.raster_order = order;
}

void Gemm::set_max_swizzle_size(int size) {
  if (size != 0 && size != 1 && size != 2 && size != 4 && size != 8) {
    throw ConfigError("max_swizzle_size must be 1, 2, 4 or 8 (or 0: run() chooses per problem); got " +
                      std::to_string(size) + ".");
  }
  if (size > 1 && !catalog::family_of(spec().family).has_persistent_scheduler()) {
    throw ConfigError(
        "max_swizzle_size applies to SM90 persistent tile schedulers; this plan uses CUTLASS 2.x "
        "kernels. Use swizzle = IdentitySwizzle" +
        std::to_string(size) + " instead.");
  }
  core_->config.max_swizzle_size = size;
}

void Gemm::set_decomposition(Decomposition mode) {
  if (mode == Decomposition::SplitK) {
    throw ConfigError("Decomposition SplitK needs a split count: call set_split_k_slices(n) with n >= 2 instead.");
  }
  assign_checked(core_->config.decomposition, mode, [&] { core_->check_k_split_settings(spec()); });
  core_->config.splits = 1;
  core_->forget_run_choices();
}

void Gemm::set_split_k_slices(int slices) {
  if (slices < 1 || slices > 1024) {
    throw ConfigError("split_k_slices must be 1 (run() chooses) to 1024; got " + std::to_string(slices) + ".");
  }
  assign_checked(core_->config.decomposition, slices > 1 ? Decomposition::SplitK : Decomposition::Auto,
                 [&] { core_->check_k_split_settings(spec()); });
  core_->config.splits = slices;
  core_->forget_run_choices();
}

void Gemm::set_reduction_mode(ReductionMode mode) {
  assign_checked(core_->config.reduction_mode, mode, [&] { core_->check_k_split_settings(spec()); });
}

namespace {

// The opclass of the kernels that load operands element by element: tensor cores for f16 and bf16 (a two-stage
// mainloop of ordinary loads), SIMT for the other types.
OpClass scalar_opclass(const families::OperandTypes& t) {
  return families::tensor_op_loads_element_by_element(t) ? OpClass::TensorOp : OpClass::Simt;
}

}  // namespace

bool Gemm::may_take_scalar_kernels() const {
  const selection::PlanConfig& c = core_->config;
  const bool identity_swizzle = c.swizzle == Swizzle::Identity1 || c.swizzle == Swizzle::Identity2 ||
                                c.swizzle == Swizzle::Identity4 || c.swizzle == Swizzle::Identity8;
  return c.opclass == OpClass::TensorOp && !c.opclass_pinned && !c.tile && !c.math_operation &&
         c.scale == ScaleMode::None && (!c.visitor || c.visitor_plain) && identity_swizzle &&
         c.decomposition == Decomposition::Auto && c.splits == 1 && families::simt_types(c.types) &&
         c.types.c == c.types.d;
}

namespace {

// Whether A or B fits none of the plan's vectors (its leading dimension, contiguous extent or address), which only
// the twin of scalar loads takes; false where either is not a valid operand (the plan's check then says why).
bool fits_no_vector(const selection::PlanCore& core, const TensorView& A, const TensorView& B) {
  const families::OperandTypes& t = core.config.types;
  auto fits_none = [](const detail::MatrixOperand& x, DataType type, const std::vector<int>& candidates) {
    return detail::fitting_alignment(x, bits_of(type) / 8, candidates.data(), static_cast<int>(candidates.size())) == 0;
  };
  try {
    return fits_none(detail::check_operand(A, "A", t.a, t.layout_a), t.a, core.cache().alignments_a) ||
           fits_none(detail::check_operand(B, "B", t.b, t.layout_b), t.b, core.cache().alignments_b);
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

Gemm& Gemm::plan_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D, double beta) {
  auto twin = [&]() -> Gemm& {
    const selection::PlanConfig& c = core_->config;
    std::lock_guard<std::mutex> lock(twin_->mutex);
    Gemm& plan = twin_->scalar.get(core_->generation(), [&] {
      GemmOptions o;
      o.element_a = c.types.a, o.element_b = c.types.b, o.element_c = c.types.c, o.element_d = c.types.d;
      o.element_accumulator = c.types.accumulator;
      o.layout_a = c.types.layout_a, o.layout_b = c.types.layout_b, o.layout_c = c.types.layout_c;
      o.cc = c.cc;
      o.kernel_cc = 80;
      const jit::NoBuildAhead internal;
      auto plan = std::make_unique<Gemm>(o);
      plan->set_opclass(scalar_opclass(c.types));
      plan->set_swizzling_functor(c.swizzle);
      if (c.visitor_plain) {
        plan->set_epilogue_visitor(c.visitor);
      } else {
        plan->set_bias(c.bias);
        plan->set_activation(c.activation, c.activation_parameter);
      }
      return plan;
    });
    // The slope is a run-time argument; the other settings move the configuration's generation, and the twin with it.
    if (plan.activation_parameter() != c.activation_parameter)
      plan.set_activation(c.activation, c.activation_parameter);
    return plan;
  };
  // Aligned operands pay nothing for the twin-first check until a plan has met ones that fit no vector.
  const bool may_take_scalar = may_take_scalar_kernels();
  const bool twin_first =
      may_take_scalar && twin_->scalar_taken.load(std::memory_order_relaxed) && fits_no_vector(*core_, A, B);
  Gemm& plan = plan_taking(
      *this, may_take_scalar, [&](Gemm& p) { (void)check_gemm_problem(*p.core_, A, B, C, D, beta); }, twin, twin_first);
  if (&plan != this) {
    twin_->scalar_taken.store(true, std::memory_order_relaxed);
    note_once("operands whose leading dimensions or addresses fit none of the " +
              std::string(to_string(core_->config.opclass)) + " kernels' vectors run on CUTLASS 2.x " +
              (scalar_opclass(core_->config.types) == OpClass::TensorOp
                   ? "tensor-op kernels that load them element by element (a two-stage mainloop)"
                   : "SIMT kernels (scalar loads)") +
              "; pad the leading dimensions to a multiple of 16 bytes for the faster kernels.");
  }
  return plan;
}

Gemm& Gemm::tree_twin() {
  std::lock_guard<std::mutex> lock(twin_->mutex);
  return twin_->tree.get(core_->generation(), [&] {
    selection::PlanConfig c = core_->config;
    c.visitor_plain.reset();
    c.activation = Activation::Identity;
    c.bias = BiasMode::None;
    c.scale = ScaleMode::None;
    auto core = make_core(c);
    core->invalidate();
    return std::unique_ptr<Gemm>(new Gemm(std::move(core)));  // the private constructor: no lowering to the plain form
  });
}

KSplit Gemm::k_split_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                         double beta) {
  Gemm& plan = plan_for(A, B, C, D, beta);
  return plan.core_->choice_without_running(check_gemm_problem(*plan.core_, A, B, C, D, beta)).split;
}

KernelSpec Gemm::spec_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                          double beta) {
  Gemm& plan = plan_for(A, B, C, D, beta);
  const selection::RunChoice c = plan.core_->choice_without_running(check_gemm_problem(*plan.core_, A, B, C, D, beta));
  return c.choices->spec(c.index);
}

std::array<TensorView, 3> Gemm::stand_in_tensors(std::int64_t m, std::int64_t n, std::int64_t k,
                                                 std::int64_t batch) const {
  // Only the address's alignment is read: one that a cudaMalloc'd buffer has.
  void* const stand_in = reinterpret_cast<void*>(std::uintptr_t{1} << 20);
  auto view = [&](DataType dtype, std::int64_t rows, std::int64_t cols, Layout layout) {
    return batch == 1 ? TensorView::on_gpu(stand_in, dtype, {rows, cols}, layout)
                      : TensorView::on_gpu(stand_in, dtype, {batch, rows, cols}, layout);
  };
  const families::OperandTypes& t = core_->config.types;
  return {view(t.a, m, k, t.layout_a), view(t.b, k, n, t.layout_b), view(t.d, m, n, t.layout_c)};
}

KernelSpec Gemm::spec_for_problem(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch) {
  const auto [A, B, D] = stand_in_tensors(m, n, k, batch);
  return spec_for(A, B, nullptr, D);
}

int Gemm::max_swizzle_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                          double beta) {
  const GemmProblem p = check_gemm_problem(*core_, A, B, C, D, beta);  // checked once: the choice and the swizzle
  return core_->swizzle_for(core_->choice_without_running(p), p);
}

std::string Gemm::running_kernel_name(const TensorView& A, const TensorView& B, const TensorView* C,
                                      const TensorView& D, double beta) {
  return core_->running_kernel_name(check_gemm_problem(*core_, A, B, C, D, beta));
}

std::vector<KernelSpec> Gemm::run_time_kernels() const {
  return core_->run_time_kernels();
}

GemmProblem check_gemm_problem(const selection::PlanCore& core, const TensorView& A, const TensorView& B,
                               const TensorView* C, const TensorView& D, double beta) {
  using detail::MatrixOperand;
  const families::OperandTypes& types_ = core.config.types;
  const selection::RunCache& cache = core.cache();
  GemmProblem p;
  p.a = detail::check_operand(A, "A", types_.a, types_.layout_a);
  p.b = detail::check_operand(B, "B", types_.b, types_.layout_b);
  p.d = detail::check_operand(D, "D", types_.d, types_.layout_c);
  p.c = p.d;
  if (C != nullptr) {
    if (types_.c == DataType::void_t) {
      throw TensorError(
          "Tensor C: the plan has no C (element_C void), so its kernel never reads one; pass no C (and "
          "beta = 0), or declare the plan with C's element type.");
    }
    p.c = detail::check_operand(*C, "C", types_.c, types_.layout_c);
  } else if (beta != 0.0) {
    throw TensorError("Tensor C: beta is " + std::to_string(beta) + " but no C was given; pass C or set beta = 0.");
  }
  const MatrixOperand &a = p.a, &b = p.b, &c = p.c, &d = p.d;
  if (a.cols != b.rows) {
    throw TensorError("Tensors A and B: A is " + std::to_string(a.rows) + " x " + std::to_string(a.cols) +
                      " (M x K) but B is " + std::to_string(b.rows) + " x " + std::to_string(b.cols) +
                      " (K x N); their K extents must agree.");
  }
  const std::int64_t m = a.rows, n = b.cols, k = a.cols;
  auto check_output_shape = [&](const MatrixOperand& x, const char* name) {
    if (x.rows != m || x.cols != n) {
      throw TensorError(std::string("Tensor ") + name + " is " + std::to_string(x.rows) + " x " +
                        std::to_string(x.cols) + " but A@B is " + std::to_string(m) + " x " + std::to_string(n) +
                        " (M x N).");
    }
  };
  check_output_shape(d, "D");
  if (C != nullptr) check_output_shape(c, "C");
  // One of A and B may broadcast a single matrix over the other's batch (of any count, 0 included).
  const std::int64_t batch = a.batch == 1 ? b.batch : a.batch;
  auto check_batch = [&](const MatrixOperand& x, const char* name) {
    if (x.batch != 1 && x.batch != batch) {
      throw TensorError(std::string("Tensor ") + name + " has a batch of " + std::to_string(x.batch) +
                        " but the GEMM's batch is " + std::to_string(batch) +
                        "; give each operand the same batch, or a single matrix to broadcast.");
    }
  };
  if (a.batch != 1 && b.batch != 1 && a.batch != b.batch) {
    throw TensorError("Tensors A and B: invalid batch counts: A has " + std::to_string(a.batch) + " and B has " +
                      std::to_string(b.batch) + "; they must be equal, or one of them 1 (broadcast).");
  }
  if (C != nullptr) check_batch(c, "C");
  if (d.batch != batch) {
    throw TensorError("Tensor D has a batch of " + std::to_string(d.batch) + " but the GEMM's batch is " +
                      std::to_string(batch) + "; D receives every result and cannot broadcast.");
  }
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX) {
    const char* operands = m > INT32_MAX         ? "Tensors A and D"
                           : n > INT32_MAX       ? "Tensors B and D"
                           : k > INT32_MAX       ? "Tensors A and B"
                           : a.batch > INT32_MAX ? "Tensors A and D"
                                                 : "Tensors B and D";
    throw TensorError(std::string(operands) + ": the problem " + std::to_string(m) + " x " + std::to_string(n) + " x " +
                      std::to_string(k) + " (batch " + std::to_string(batch) +
                      ") exceeds 2^31-1 in one dimension, the kernels' limit; split it.");
  }
  if (k == 0 && m != 0 && n != 0 && batch != 0) {
    throw TensorError(
        "Tensors A and B: K is 0, so every output would be beta * C; gemmkit runs no kernel for that. "
        "Give A and B a K of at least 1.");
  }
  // D's matrices must not overlap, or the kernels would race on the shared elements: each lies past the one before,
  // or they interleave, each batch's part of a row (or column) beside the others' within the leading dimension.
  const std::int64_t d_matrix = d.rows * d.cols == 0 ? 0 : (d.rows * d.cols / d.inner - 1) * d.ld + d.inner;
  auto interleaved = [&] {
    return d.batch_stride >= d.inner && d.ld >= d.inner && d.batch_stride <= (d.ld - d.inner) / (d.batch - 1);
  };
  if (d.batch > 1 && d.batch_stride < d_matrix && !interleaved()) {
    throw TensorError("Tensor D: its batch stride " + std::to_string(d.batch_stride) + " is less than one matrix (" +
                      std::to_string(d_matrix) +
                      " elements), so the batches would overwrite each other; give D a "
                      "batch stride of at least " +
                      std::to_string(d_matrix) + ".");
  }

  // The first (widest) candidate vector, in the operand's elements, that its layout and address fit.
  auto fit = [&](const MatrixOperand& x, DataType type, const std::vector<int>& candidates, const char* name) {
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (detail::fitting_alignment(x, (bits_of(type) / 8), &candidates[i], 1) != 0) return i;
    }
    throw TensorError(std::string("Tensor ") + name + ": its leading dimension " + std::to_string(x.ld) +
                      (x.batch > 1 ? ", batch stride " + std::to_string(x.batch_stride) : std::string()) +
                      ", contiguous extent " + std::to_string(x.inner) + " or address is not a multiple of " +
                      std::to_string(candidates.back()) + " elements (" +
                      std::to_string(candidates.back() * (bits_of(type) / 8)) + " bytes), the narrowest " +
                      std::string(to_string(core.config.opclass)) + " kernels for " + std::string(to_string(type)) +
                      " accept. Pad the leading dimension, or set opclass = Simt" +
                      (cache.kernel_cc >= 90 && families::is_half(type)
                           ? " or kernel_cc = 80 (2.x tensor-op kernels that load it element by element)."
                           : "."));
  };
  const auto& alignments_c = cache.alignments_c;
  const int align_a = cache.alignments_a[fit(a, types_.a, cache.alignments_a, "A")];
  const int align_b = cache.alignments_b[fit(b, types_.b, cache.alignments_b, "B")];
  // D is stored in vectors of as many bytes as C's: C's candidates, counted in D's elements.
  std::vector<int> d_vectors;
  for (int a_c : alignments_c) d_vectors.push_back(output_alignment(types_.c, types_.d, a_c));
  int align_c = alignments_c[fit(d, types_.d, d_vectors, "D")];
  if (C != nullptr) align_c = std::min(align_c, alignments_c[fit(c, types_.c, alignments_c, "C")]);
  p.m = m;
  p.n = n;
  p.k = k;
  p.batch = batch;
  p.alignment_a = align_a;
  p.alignment_b = align_b;
  p.alignment_c = align_c;
  return p;
}

namespace {

std::optional<detail::MatrixOperand> check_bias_operand(const selection::PlanConfig& config, const TensorView* bias,
                                                        const GemmProblem& p) {
  const BiasMode bias_ = config.bias;
  if (bias_ == BiasMode::None) {
    if (bias == nullptr) return std::nullopt;
    throw TensorError(
        "Tensor bias: the plan has no bias epilogue; call set_bias(BiasMode::PerRow or PerColumn) "
        "first.");
  }
  const bool per_row = bias_ == BiasMode::PerRow;
  if (bias == nullptr) {
    throw TensorError("Tensor bias: the plan adds a per-" + std::string(per_row ? "row" : "column") +
                      " bias; pass it as RunOptions::bias (or set_bias(BiasMode::None)).");
  }
  return detail::check_vector(*bias, "bias", families::c_or_d(config.types), per_row ? p.m : p.n,
                              per_row ? "row" : "column");
}

// The scale vectors the plan's ScaleMode asks for: row_scale (m) and column_scale (n), f32.
std::pair<std::optional<detail::MatrixOperand>, std::optional<detail::MatrixOperand>> check_scale_operands(
    const selection::PlanConfig& config, const RunOptions& options, const GemmProblem& p) {
  const ScaleMode scale_ = config.scale;
  const bool rows = scale_ == ScaleMode::PerRow || scale_ == ScaleMode::RowAndColumn;
  const bool columns = scale_ == ScaleMode::PerColumn || scale_ == ScaleMode::RowAndColumn;
  auto check = [&](const TensorView* vector, bool wanted, const char* name, std::int64_t length, const char* per) {
    std::optional<detail::MatrixOperand> out;
    if (vector == nullptr && !wanted) return out;
    if (vector == nullptr || !wanted) {
      throw TensorError(std::string("Tensor ") + name + ": the plan's scale is " + std::string(to_string(scale_)) +
                        (wanted ? ", which takes it; pass RunOptions::" + std::string(name)
                                : ", which does not take it; call set_scale(ScaleMode::" +
                                      std::string(vector == options.row_scale ? "PerRow" : "PerColumn") +
                                      " or RowAndColumn) first") +
                        ".");
    }
    out = detail::check_vector(*vector, name, DataType::f32, length, per);
    return out;
  };
  return {check(options.row_scale, rows, "row_scale", p.m, "row"),
          check(options.column_scale, columns, "column_scale", p.n, "column")};
}

// A's and B's block scales when the plan's mainloop takes them (set_block_scaling), as torch._scaled_mm lays them out.
std::pair<std::optional<detail::MatrixOperand>, std::optional<detail::MatrixOperand>> check_block_scale_operands(
    const selection::PlanConfig& config, const RunOptions& options, const GemmProblem& p) {
  if (!detail::require_block_scales(config.block_scaling != BlockScaling::None, options.scale_a, options.scale_b)) {
    return {};
  }
  if (p.m % 4 != 0) {
    throw TensorError("Tensor scale_a: the kernel loads A's scales with TMA, in 16-byte runs along M; M = " +
                      std::to_string(p.m) + " is not a multiple of 4. Pad A, D and scale_a to a multiple of 4 rows.");
  }
  const std::int64_t k_blocks = (p.k + 127) / 128, n_blocks = (p.n + 127) / 128;
  return {detail::check_block_scales(*options.scale_a, "scale_a", p.batch, p.m, k_blocks, 1, p.m, 16,
                                     "M x ceil(K/128), M-major: strides (1, M)"),
          detail::check_block_scales(*options.scale_b, "scale_b", p.batch, n_blocks, k_blocks, k_blocks, 1, 4,
                                     "ceil(N/128) x ceil(K/128), row-major: strides (ceil(K/128), 1)")};
}

}  // namespace

void Gemm::run(const TensorView& A, const TensorView& B, const TensorView* C_given, const TensorView& D_given,
               double alpha, double beta, const RunOptions& options) {
  const selection::PlanConfig& config = core_->config;
  // A visitor tree takes C and D by name too, and reads C only if a node does (beta is then just a scalar).
  const TensorView* C = detail::visitor_tensor(options, "C", C_given);
  const TensorView& D = *detail::visitor_tensor(options, "D", &D_given);
  // A plain-form tree runs on the fused kernel of the same settings, with its scalars and vectors from visitor_args.
  double run_alpha = alpha, run_beta = beta;
  std::optional<RunOptions> plain;
  if (config.visitor_plain && detail::plain_vectors_per_batch(*config.visitor_plain, options)) {
    tree_twin().run(A, B, C_given, D_given, alpha, beta, options);
    return;
  }
  if (config.visitor_plain) {
    plain = detail::plain_run_options(*config.visitor, *config.visitor_plain, options, run_alpha, run_beta);
  }
  const RunOptions& run_options = plain ? *plain : options;
  const bool tree_kernel = config.visitor && !config.visitor_plain;
  if (tree_kernel && config.visitor->reads_source() && C == nullptr) {
    throw TensorError("Tensor C: the epilogue visitor tree reads C; pass it to run() or in visitor_args.");
  }
  const double beta_for_check = tree_kernel ? (config.visitor->reads_source() ? 1.0 : 0.0) : run_beta;
  if (!config.visitor && !options.visitor_args.empty()) {
    throw TensorError("visitor_args: the plan has no epilogue visitor tree; set one (epilogue_visitor) first.");
  }
  if (Gemm& plan = plan_for(A, B, C, D, beta_for_check); &plan != this) {
    plan.run(A, B, C, D, alpha, beta, options);
    return;
  }
  // Check every tensor against the plan; nothing is written before all checks pass.
  const families::OperandTypes& types_ = config.types;
  const GemmProblem p = check_gemm_problem(*core_, A, B, C, D, beta_for_check);
  const std::optional<detail::MatrixOperand> bias = check_bias_operand(config, run_options.bias, p);
  const auto [row_scale, column_scale] = check_scale_operands(config, run_options, p);
  const auto [scale_a, scale_b] = check_block_scale_operands(config, run_options, p);
  const int device = current_device();
  // The message is built only when it is thrown: run() checks every tensor on every call.
  auto on_this_device = [&](const TensorView* tensor, const char* before, std::string_view name, const char* after) {
    if (tensor != nullptr && tensor->on_device() && tensor->device != device) {
      throw TensorError(before + std::string(name) + after + " lives on CUDA device " + std::to_string(tensor->device) +
                        " but the current device is " + std::to_string(device) +
                        "; call cudaSetDevice first or move the tensor.");
    }
  };
  for (const auto& [tensor, name] : {std::pair{&A, "A"},
                                     {&B, "B"},
                                     {&D, "D"},
                                     {C, "C"},
                                     {run_options.bias, "bias"},
                                     {run_options.row_scale, "row_scale"},
                                     {run_options.column_scale, "column_scale"},
                                     {run_options.scale_a, "scale_a"},
                                     {run_options.scale_b, "scale_b"}}) {
    on_this_device(tensor, "Tensor ", name, "");
  }
  for (const VisitorArgument& a : options.visitor_args) {
    if (a.tensor) on_this_device(&*a.tensor, "Visitor argument '", a.name, "'");
  }
  if (p.m == 0 || p.n == 0 || p.batch == 0) return;  // an empty D: nothing to compute, nothing to write

  // Choose the kernel for these alignments (resolved once per alignment triple) and this problem's shape.
  const int sm_count = device_info(device).sm_count;
  selection::RunChoice c = core_->run_choice(p, sm_count);
  std::vector<runtime::VisitorOperand> visitor;
  if (c.choices->base.visitor) {
    visitor = detail::check_visitor_args(c.choices->base, options, alpha, beta, p.m, p.n, p.batch);
  }
  KernelModule* module = &core_->launch_module(c, run_options.wait_for_best);
  const selection::KernelChoices& choices = *c.choices;
  if (run_options.print_module) std::fputs(render(choices.spec(c.index)).text.c_str(), stdout);
  if (run_options.bias != nullptr && run_options.bias->on_device()) {
    const auto bytes =
        static_cast<std::uintptr_t>(catalog::family_of(choices.base.family).bias_alignment_bytes(choices.base));
    if (reinterpret_cast<std::uintptr_t>(run_options.bias->data) % bytes != 0) {
      throw TensorError("Tensor bias: its address must be aligned to " + std::to_string(bytes) +
                        " bytes (the kernel's vector width for C); allocate it like C.");
    }
  }

  // Launch on the caller's stream; host tensors are staged through the GPU.
  const auto operand = detail::launch_operand;
  runtime::GemmLaunch gemm;
  gemm.a = operand(p.a, A, types_.a);
  gemm.b = operand(p.b, B, types_.b);
  gemm.d = operand(p.d, D, types_.d);
  if (C != nullptr) gemm.c = operand(p.c, *C, types_.c);
  if (bias) gemm.bias = operand(*bias, *run_options.bias, families::c_or_d(types_));
  if (row_scale) gemm.row_scale = operand(*row_scale, *run_options.row_scale, DataType::f32);
  if (column_scale) gemm.column_scale = operand(*column_scale, *run_options.column_scale, DataType::f32);
  // A block-scaled module reads A's and B's scales where the ABI has the scale vectors (sm90_blockwise.hpp).
  if (scale_a) gemm.row_scale = operand(*scale_a, *run_options.scale_a, DataType::f32);
  if (scale_b) gemm.column_scale = operand(*scale_b, *run_options.scale_b, DataType::f32);
  gemm.d_has_gaps = p.d.span != p.d.rows * p.d.cols * p.d.batch;
  gemm.m = p.m;
  gemm.n = p.n;
  gemm.k = p.k;
  gemm.batch = p.batch;
  gemm.transposed = core_->cache().transposed != c.transposed();
  gemm.alpha = run_alpha;
  gemm.beta = run_beta;
  gemm.activation_parameter = config.activation_parameter;
  gemm.activation = choices.base.activation;
  gemm.bias_mode = choices.base.bias;
  gemm.raster_order = config.raster_order;
  {
    // A stand-in (the chosen kernel still compiling) runs unswizzled unless the plan sets a swizzle: the choice's
    // swizzle could pad the stand-in's tiles.
    std::lock_guard<std::mutex> lock(core_->cache().mutex);
    const bool chosen = c.choices->slots.modules[c.index].get() == module;
    gemm.max_swizzle_size = chosen ? core_->swizzle_for(c, p) : std::max(config.max_swizzle_size, 1);
  }
  gemm.k_split = c.split;
  gemm.reduction_mode = config.reduction_mode;
  gemm.device = device;
  gemm.sm_count = sm_count;
  gemm.visitor = std::move(visitor);
  runtime::launch(*module, gemm, run_options.stream, run_options.sync, run_options.workspace);
}

}  // namespace gemmkit
