// src/api/gemm.cpp: the Gemm plan: operand inference, configuration, compile, and run() as check -> choose -> launch.
#include "gemmkit/gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "api/plan_state.hpp"
#include "api/tensor_check.hpp"
#include "catalog/catalog.hpp"
#include "families/rules.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/runtime.hpp"
#include "jit/kernel_loader.hpp"
#include "runtime/launch.hpp"
#include "tuning/choice.hpp"
#include "util/knobs.hpp"
#include "util/notes.hpp"

namespace gemmkit {
namespace {

// The plan's element types and layouts as the catalog takes them (Gemm's private Types has the same fields).
template <class PlanTypes>
families::OperandTypes operand_types(const PlanTypes& t) {
  return {t.a, t.b, t.c, t.d, t.accumulator, t.layout_a, t.layout_b, t.layout_c};
}

DataType resolve_element(const char* name, const TensorView* tensor, const std::optional<DataType>& specific,
                         const std::optional<DataType>& generic) {
  if (tensor != nullptr && specific) {
    throw ConfigError(std::string("Must not specify both element_") + name + " and tensor " + name + ".");
  }
  if (tensor != nullptr) return tensor->dtype;
  if (specific) return *specific;
  if (generic) return *generic;
  throw ConfigError(std::string("Must specify one of element_") + name + ", tensor " + name + ", or generic element.");
}

Layout resolve_layout(const char* name, const TensorView* tensor, const std::optional<Layout>& specific,
                      const std::optional<Layout>& generic) {
  if (tensor != nullptr && specific) {
    throw ConfigError(std::string("Must not specify both layout_") + name + " and tensor " + name + ".");
  }
  if (tensor != nullptr) {
    if (auto layout = detail::infer_layout(*tensor)) return *layout;
    throw ConfigError(std::string("Tensor ") + name + " with shape " + tensor->shape_string() + " and strides " +
                      tensor->strides_string() +
                      " is neither row- nor column-major in its last two dimensions; make it contiguous first.");
  }
  if (specific) return *specific;
  if (generic) return *generic;
  throw ConfigError(std::string("Must specify one of layout_") + name + ", tensor " + name + ", or generic layout.");
}

int resolve_cc(const std::optional<int>& cc) {
  const int value = cc ? *cc : device_info(current_device()).cc;
  if (value < 80) {
    throw ConfigError("gemmkit builds kernels for compute capability 80 (Ampere) and newer; got cc " +
                      std::to_string(value) + ".");
  }
  if (value >= 100) {
    throw ConfigError("Compute capability " + std::to_string(value) +
                      " is not supported yet: gemmkit has SM80 and SM90 kernel families. Pass cc=90 to build "
                      "Hopper kernels.");
  }
  return value;
}

std::string combination_text(const families::OperandTypes& t) {
  return "(" + std::string(to_string(t.a)) + ", " + std::string(to_string(t.b)) + ", " +
         std::string(to_string(t.accumulator)) + ")x(" + std::string(to_string(t.layout_a)) + ", " +
         std::string(to_string(t.layout_b)) + ")";
}

// The options to change from `from` to `to`, in the reference's names (as GemmOptions' fields take them).
std::vector<ConfigError::Setting> nearest_settings(const families::OperandTypes& from,
                                                   const std::optional<families::OperandTypes>& to) {
  using T = families::OperandTypes;
  std::vector<ConfigError::Setting> out;
  if (!to) return out;
  for (const auto& [option, field] : {std::pair{"element_accumulator", &T::accumulator},
                                      {"element_A", &T::a},
                                      {"element_B", &T::b},
                                      {"element_C", &T::c},
                                      {"element_D", &T::d}}) {
    if (from.*field != (*to).*field) out.push_back({option, std::string(to_string((*to).*field))});
  }
  for (const auto& [option, field] :
       {std::pair{"layout_A", &T::layout_a}, {"layout_B", &T::layout_b}, {"layout_C", &T::layout_c}}) {
    if (from.*field != (*to).*field) out.push_back({option, std::string(to_string((*to).*field))});
  }
  return out;
}

// Throws the FP8 rule that `types` break with `opclass` on `target` (families::fp8_rule_violation), if any.
void throw_fp8_rule(const catalog::Target& target, const families::OperandTypes& types, OpClass opclass) {
  std::string why = families::fp8_rule_violation(target.cc, target.kernel_cc.value_or(target.cc), opclass, types);
  if (why.empty() && is_fp8(types.a) && target.operation != catalog::Operation::Gemm) {
    why = "FP8 operands (e4m3, e5m2) are supported by Gemm only, not by grouped GEMM or Conv2d plans.";
  }
  if (!why.empty()) throw ConfigError(why);
}

int bytes_of(DataType t) {
  return bits_of(t) / 8;
}

}  // namespace

Gemm::Gemm(const GemmOptions& o) : Gemm(o, catalog::Operation::Gemm) {}

Gemm::Gemm(const GemmOptions& o, catalog::Operation operation) : operation_(operation) {
  types_.a = resolve_element("A", o.A, o.element_a, o.element);
  types_.b = resolve_element("B", o.B, o.element_b, o.element);
  types_.c = resolve_element("C", o.C, o.element_c, o.element);
  types_.d = resolve_element("D", o.D, o.element_d, o.element);
  // The reference accumulates in C's type by default; FP8 math accumulates in f32 only.
  types_.accumulator = o.element_accumulator ? *o.element_accumulator : is_fp8(types_.a) ? DataType::f32 : types_.c;
  types_.layout_a = resolve_layout("A", o.A, o.layout_a, o.layout);
  types_.layout_b = resolve_layout("B", o.B, o.layout_b, o.layout);
  types_.layout_c = resolve_layout("C", o.C, o.layout_c, o.layout);
  cc_ = resolve_cc(o.cc);
  if (o.kernel_cc) {
    const int k = *o.kernel_cc;
    if ((k != 80 && k != 90) || k > cc_ || (k == 90 && cc_ >= 100)) {
      throw ConfigError("kernel_cc " + std::to_string(k) + " is not available for cc " + std::to_string(cc_) +
                        ": use 80 (CUTLASS 2.x kernels, any SM80+ GPU) or 90 (CUTLASS 3.x kernels, SM90 only).");
    }
    kernel_cc_ = k;
  }
  const auto available = opclasses();
  if (available.empty()) {
    const auto t = operand_types(types_);
    throw_fp8_rule(target(), t, OpClass::TensorOp);
    const auto nearest = nearest_settings(t, catalog::nearest_supported(target(), t));
    std::string message = "No kernel configuration found for supported data type and layout combination " +
                          combination_text(t) + " with C=" + std::string(to_string(types_.c)) +
                          ", D=" + std::string(to_string(types_.d)) + " on SM" + std::to_string(cc_) +
                          ". Supported: f16/bf16 (accumulate f32; f16 also f16), f32, f64, s8 -> s32 (tensor cores: "
                          "A row-major, B column-major).";
    for (std::size_t i = 0; i < nearest.size(); ++i) {
      message +=
          (i == 0 ? " The nearest combination with a kernel sets " : ", ") + nearest[i].option + "=" + nearest[i].value;
    }
    throw ConfigError(nearest.empty() ? message : message + ".", nearest);
  }
  opclass_ = available.front();
  invalidate();
}

Gemm::~Gemm() = default;
Gemm::Gemm(Gemm&&) noexcept = default;
Gemm& Gemm::operator=(Gemm&&) noexcept = default;

std::vector<OpClass> Gemm::opclasses() const {
  return catalog::supported_opclasses(target(), operand_types(types_));
}

void Gemm::invalidate() {
  const auto t = operand_types(types_);
  auto cache = std::make_unique<RunCache>();
  const catalog::Target where = target();  // a named value: the family is not tied to a temporary
  const families::Family& family = catalog::family_for(where, opclass_, t);
  cache->alignments_a = catalog::operand_alignments(target(), opclass_, types_.a, t);
  cache->alignments_b = catalog::operand_alignments(target(), opclass_, types_.b, t);
  cache->alignments_c = catalog::operand_alignments(target(), opclass_, types_.c, t);
  if (family.kernel_cc() >= 90 &&
      (activation_ != Activation::Identity || bias_ != BiasMode::None || scale_ != ScaleMode::None)) {
    // SM90 kernels fuse an activation, bias or scale vectors in a TMA epilogue, which moves C and D in 16-byte vectors
    // only.
    std::erase_if(cache->alignments_c, [&](int a) { return a * bits_of(types_.c) % 128 != 0; });
  }
  cache->transposed = family.computes_transposed(opclass_, t);
  cache->kernel_cc = family.kernel_cc();
  run_cache_ = std::move(cache);
}

void Gemm::set_opclass(OpClass opclass) {
  const auto available = opclasses();
  if (std::find(available.begin(), available.end(), opclass) == available.end()) {
    const auto t = operand_types(types_);
    throw_fp8_rule(target(), t, opclass);
    throw ConfigError("Unsupported operation class " + std::string(to_string(opclass)) + " for CC " +
                      std::to_string(cc_) + " and data type combination (" + std::string(to_string(t.a)) + ", " +
                      std::string(to_string(t.b)) + ", " + std::string(to_string(t.accumulator)) +
                      ") and layout combination (" + std::string(to_string(t.layout_a)) + ", " +
                      std::string(to_string(t.layout_b)) + ").");
  }
  opclass_pinned_ = true;
  if (opclass == opclass_) return;
  if (math_operation_) {
    const OpClass before = std::exchange(opclass_, opclass);
    const auto ops = math_operations();
    opclass_ = before;
    if (std::find(ops.begin(), ops.end(), *math_operation_) == ops.end()) {
      throw ConfigError("Math operation " + std::string(to_string(*math_operation_)) + " has no " +
                        std::string(to_string(opclass)) + " kernels; unset math_operation first (None).");
    }
  }
  opclass_ = opclass;
  tile_.reset();  // tiles of one opclass mean nothing to the other
  if (opclass_ == OpClass::Simt && swizzle_ == Swizzle::StreamK) swizzle_ = Swizzle::Identity1;
  invalidate();
}

std::vector<TileDescription> Gemm::tile_descriptions() const {
  const auto t = operand_types(types_);
  std::vector<TileDescription> out = catalog::tile_descriptions(target(), opclass_, t, catalog::limits_for_cc(cc_));
  if (math_operation_) {
    std::erase_if(out, [&](const TileDescription& td) { return td.math_operation != *math_operation_; });
  }
  return out;
}

std::vector<MathOperation> Gemm::math_operations() const {
  const auto t = operand_types(types_);
  const auto limits = catalog::limits_for_cc(cc_);
  const catalog::Target own = kernel_cc_for_math_ ? catalog::Target{cc_, std::nullopt, operation_} : target();
  std::vector<MathOperation> out = catalog::math_operations(own, opclass_, t, limits);
  if (cc_ >= 90 && (!kernel_cc_ || kernel_cc_for_math_)) {
    try {
      for (MathOperation math : catalog::math_operations({cc_, 80, operation_}, opclass_, t, limits)) {
        if (std::find(out.begin(), out.end(), math) == out.end()) out.push_back(math);
      }
    } catch (const ConfigError&) {
      // no 2.x kernel for this opclass: the plan's own generation's operations are all there are
    }
  }
  return out;
}

void Gemm::set_math_operation(std::optional<MathOperation> math) {
  const auto t = operand_types(types_);
  const auto limits = catalog::limits_for_cc(cc_);
  auto offers = [&](const catalog::Target& where) {
    try {
      const auto ops = catalog::math_operations(where, opclass_, t, limits);
      return !math || std::find(ops.begin(), ops.end(), *math) != ops.end();
    } catch (const ConfigError&) {
      return false;
    }
  };
  const bool own_generation = kernel_cc_for_math_ ? offers({cc_, std::nullopt, operation_}) : offers(target());
  if (kernel_cc_for_math_ && own_generation) {  // back to the generation the options chose
    kernel_cc_.reset();
    kernel_cc_for_math_ = false;
  } else if (!own_generation && !offers(target())) {
    const bool older_offers = cc_ >= 90 && !kernel_cc_ && offers({cc_, 80, operation_});
    if (!older_offers) {
      std::string offered;
      for (MathOperation m : math_operations()) offered += (offered.empty() ? "" : ", ") + std::string(to_string(m));
      const bool pinned = kernel_cc_ && *kernel_cc_ >= 90 && offers({cc_, 80, operation_});
      throw ConfigError("Math operation " + std::string(to_string(*math)) + " is not available for " +
                        combination_text(t) + " " + std::string(to_string(opclass_)) + " kernels on SM" +
                        std::to_string(cc_) +
                        (pinned ? " with kernel_cc 90: CUTLASS 3.x kernels have one math operation. Leave kernel_cc "
                                  "unset (or pass kernel_cc=80) for the CUTLASS 2.x kernels, which offer it"
                                : std::string(". Available: ") + offered + "; or leave math_operation unset") +
                        ".");
    }
    kernel_cc_ = 80;
    kernel_cc_for_math_ = true;
    note_once("math operation " + std::string(to_string(*math)) + " is offered by CUTLASS 2.x kernels only; this SM" +
              std::to_string(cc_) + " plan uses them (kernel_cc 80). Pass kernel_cc=80 to choose them explicitly.");
  }
  math_operation_ = math;
  if (tile_ && math && tile_->math_operation != *math) tile_.reset();
  invalidate();
}

KernelSpec Gemm::base_spec(std::optional<int> alignment_a, std::optional<int> alignment_b,
                           std::optional<int> alignment_c) const {
  const auto t = operand_types(types_);
  KernelSpec s;
  s.cc = cc_;
  const catalog::Target where = target();  // a named value: the family is not tied to a temporary
  const families::Family& family = catalog::family_for(where, opclass_, t);
  s.kernel_cc = family.kernel_cc();
  s.family = family.id();
  s.opclass = opclass_;
  s.element_a = types_.a;
  s.element_b = types_.b;
  s.element_c = types_.c;
  s.element_d = types_.d;
  s.element_accumulator = types_.accumulator;
  s.layout_a = types_.layout_a;
  s.layout_b = types_.layout_b;
  s.layout_c = types_.layout_c;
  s.alignment_a = alignment_a.value_or(catalog::operand_alignments(target(), opclass_, types_.a, t).front());
  s.alignment_b = alignment_b.value_or(catalog::operand_alignments(target(), opclass_, types_.b, t).front());
  s.alignment_c = alignment_c.value_or(catalog::operand_alignments(target(), opclass_, types_.c, t).front());
  s.swizzle = swizzle_;
  s.activation = activation_;
  s.bias = bias_;
  s.scale = scale_;
  if (family.computes_transposed(opclass_, t)) {
    // The kernel sees A' = B^T, B' = A^T, C' = C^T: same memory, flipped layouts; run() swaps the arguments.
    auto flip = [](Layout l) { return l == Layout::RowMajor ? Layout::ColumnMajor : Layout::RowMajor; };
    std::swap(s.element_a, s.element_b);
    std::swap(s.alignment_a, s.alignment_b);
    s.layout_a = flip(types_.layout_b);
    s.layout_b = flip(types_.layout_a);
    s.layout_c = flip(types_.layout_c);
    if (s.bias != BiasMode::None) s.bias = s.bias == BiasMode::PerRow ? BiasMode::PerColumn : BiasMode::PerRow;
    if (s.scale == ScaleMode::PerRow || s.scale == ScaleMode::PerColumn) {
      s.scale = s.scale == ScaleMode::PerRow ? ScaleMode::PerColumn : ScaleMode::PerRow;
    }
  }
  complete_spec(s);
  return s;
}

std::vector<TileDescription> Gemm::valid_tiles(const KernelSpec& base) const {
  const auto limits = catalog::limits_for_cc(cc_);
  if (tile_) {
    KernelSpec s = base;
    s.tile = *tile_;
    catalog::validate(s, limits);
    return {*tile_};
  }
  const auto t = operand_types(types_);
  std::vector<TileDescription> valid;
  std::string last_error = "no configurations";
  const auto listed = catalog::tile_descriptions(target(), opclass_, t, limits, base.alignment_a, base.alignment_b);
  // run() keeps to one math operation: the plan's, else the default configuration's.
  const MathOperation math =
      math_operation_.value_or(listed.empty() ? MathOperation::MultiplyAdd : listed.front().math_operation);
  for (const auto& tile : listed) {
    if (tile.math_operation != math) continue;
    KernelSpec s = base;
    s.tile = tile;
    try {
      catalog::validate(s, limits);
      valid.push_back(tile);
    } catch (const ConfigError& e) {
      last_error = e.what();
    }
  }
  if (valid.empty()) {
    throw ConfigError("No valid configuration for " + std::string(to_string(opclass_)) + " on SM" +
                      std::to_string(cc_) + " with alignments " + std::to_string(base.alignment_a) + "/" +
                      std::to_string(base.alignment_b) + "/" + std::to_string(base.alignment_c) + ": " + last_error);
  }
  return valid;
}

KernelSpec Gemm::spec(std::optional<int> alignment_a, std::optional<int> alignment_b,
                      std::optional<int> alignment_c) const {
  KernelSpec s = base_spec(alignment_a, alignment_b, alignment_c);
  s.tile = valid_tiles(s).front();  // the set tile, else the first valid one in catalog order
  return s;
}

void Gemm::set_tile_description(const TileDescription& tile) {
  KernelSpec s = spec();
  s.tile = tile;
  catalog::validate(s, catalog::limits_for_cc(cc_));
  tile_ = tile;
  catalog::describe_instruction(*tile_, opclass_, operand_types(types_));
  invalidate();
}

void Gemm::update_tile_description(const TileDescriptionUpdate& update) {
  set_tile_description(update.applied_to(tile_ ? *tile_ : spec().tile));
}

catalog::Target Gemm::target() const {
  return {cc_, kernel_cc_, operation_};
}

void Gemm::require_operation(catalog::Operation operation, const char* what) const {
  if (operation_ == operation) return;
  const char* plan = operation_ == catalog::Operation::GroupedGemm ? "GroupedGemm; call its run(As, Bs, Cs, Ds)"
                     : operation_ == catalog::Operation::Conv2d    ? "Conv2d; call its run(A, B, C, D, geometry)"
                                                                   : "Gemm; call its run(A, B, C, D)";
  throw ConfigError(std::string(what) + " does not apply to this plan: it is a " + plan + ".");
}

std::vector<Swizzle> Gemm::swizzling_functors() const {
  return catalog::family_for(target(), opclass_, operand_types(types_)).swizzles(opclass_);
}

namespace {

// Sets `field`, and restores it when `check` throws.
template <class Field, class Check>
void assign_checked(Field& field, Field value, const Check& check) {
  const Field previous = field;
  field = value;
  try {
    check();
  } catch (...) {
    field = previous;
    throw;
  }
}

}  // namespace

template <class Field>
void Gemm::change_checked(Field& field, Field value) {
  const Field previous = field;
  assign_checked(field, value, [&] { (void)spec(); });  // every rule is checked before the plan keeps the value
  if (previous != value) invalidate();
}

void Gemm::set_swizzling_functor(Swizzle swizzle) {
  const auto allowed = swizzling_functors();
  if (std::find(allowed.begin(), allowed.end(), swizzle) == allowed.end()) {
    KernelSpec s = spec();
    s.swizzle = swizzle;
    catalog::validate(s, catalog::limits_for_cc(cc_));  // the family's rule says why it offers no such swizzle
    throw Error("internal error: the " + std::string(to_string(s.family)) + " family offers no " +
                std::string(to_string(swizzle)) + " but its rules accept it");
  }
  change_checked(swizzle_, swizzle);  // with an explicit tile, Stream-K needs it to be cooperative
}

std::vector<Activation> Gemm::activations() {
  std::vector<Activation> all;
  for (const auto& row : enum_rows<Activation>()) all.push_back(row.value);
  return all;
}

void Gemm::set_activation(Activation activation, double parameter) {
  change_checked(activation_, activation);
  activation_parameter_ = parameter;  // a run-time argument: the kernel stays
}

void Gemm::set_bias(BiasMode bias) {
  change_checked(bias_, bias);
}

void Gemm::set_scale(ScaleMode scale) {
  change_checked(scale_, scale);
}

void Gemm::set_raster_order(RasterOrder order) {
  if (order != RasterOrder::Heuristic && !catalog::family_of(spec().family).has_persistent_scheduler()) {
    throw ConfigError(
        "Raster order applies to SM90 persistent tile schedulers; this plan uses CUTLASS 2.x kernels. "
        "Use swizzle = IdentitySwizzle2/4/8 instead.");
  }
  raster_order_ = order;
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
  max_swizzle_size_ = size;
}

namespace {

// GEMMKIT_SPLIT_K (read once per process): "auto" lets run() split K by itself, on SM90 with parallel split-K where
// it applies; "stream-k" only on the Stream-K kernel; "off" never.
enum class AutoSplit { Off, StreamK, Parallel };
AutoSplit automatic_split() {
  static const AutoSplit mode = [] {
    const std::string value = knobs::value("GEMMKIT_SPLIT_K");
    if (value.empty() || value == "auto") return AutoSplit::Parallel;
    if (value == "stream-k") return AutoSplit::StreamK;
    if (value == "off") return AutoSplit::Off;
    throw ConfigError("GEMMKIT_SPLIT_K='" + value + "' is not auto, stream-k or off; unset it or set one of them.");
  }();
  return mode;
}

bool automatic_split_k() {
  return automatic_split() != AutoSplit::Off;
}

bool forces_stream_k(Decomposition mode) {
  return mode != Decomposition::Auto;
}

}  // namespace

void Gemm::check_k_split_settings(const KernelSpec& spec) const {
  if (!forces_stream_k(decomposition_) && reduction_mode_ == ReductionMode::Deterministic) return;
  if (!catalog::family_of(spec.family).has_persistent_scheduler()) {
    throw ConfigError(
        "Split-K slices, a decomposition and a reduction mode apply to SM90 Stream-K kernels; this plan uses CUTLASS "
        "2.x kernels (" +
        std::string(to_string(spec.family)) + "). Use swizzle = ThreadblockSwizzleStreamK for Stream-K there.");
  }
  if (forces_stream_k(decomposition_) && tile_ && !families::uses_stream_k(spec)) {
    throw ConfigError("Decomposition " + std::string(to_string(decomposition_)) +
                      " needs the Stream-K tile scheduler, but the plan's tile " + tile_->to_string() +
                      " has none; set its tile_scheduler to StreamK or set_swizzling_functor(StreamK).");
  }
}

void Gemm::set_decomposition(Decomposition mode) {
  require_operation(catalog::Operation::Gemm, "set_decomposition");
  if (mode == Decomposition::SplitK) {
    throw ConfigError("Decomposition SplitK needs a split count: call set_split_k_slices(n) with n >= 2 instead.");
  }
  assign_checked(decomposition_, mode, [&] { check_k_split_settings(spec()); });
  splits_ = 1;
  forget_run_choices();
}

void Gemm::set_split_k_slices(int slices) {
  require_operation(catalog::Operation::Gemm, "set_split_k_slices");
  if (slices < 1 || slices > 1024) {
    throw ConfigError("split_k_slices must be 1 (run() chooses) to 1024; got " + std::to_string(slices) + ".");
  }
  assign_checked(decomposition_, slices > 1 ? Decomposition::SplitK : Decomposition::Auto,
                 [&] { check_k_split_settings(spec()); });
  splits_ = slices;
  forget_run_choices();
}

void Gemm::forget_run_choices() {
  std::lock_guard<std::mutex> lock(run_cache_->mutex);
  for (KernelChoices& choices : run_cache_->choices) choices.last_choice.reset();
}

void Gemm::set_reduction_mode(ReductionMode mode) {
  require_operation(catalog::Operation::Gemm, "set_reduction_mode");
  assign_checked(reduction_mode_, mode, [&] { check_k_split_settings(spec()); });
}

KernelSpec Gemm::construct(const std::optional<TileDescription>& tile, std::optional<int> alignment_a,
                           std::optional<int> alignment_b, std::optional<int> alignment_c) {
  if (tile) set_tile_description(*tile);
  return spec(alignment_a, alignment_b, alignment_c);
}

KernelSource Gemm::render_source() const {
  return render(spec());
}

CompiledKernel Gemm::compile(const std::optional<TileDescription>& tile) {
  return build_kernel(construct(tile));
}

Gemm::KernelChoices& Gemm::choices_for(const Problem& p) {
  std::lock_guard<std::mutex> lock(run_cache_->mutex);
  for (auto& choices : run_cache_->choices) {
    if (choices.a == p.alignment_a && choices.b == p.alignment_b && choices.c == p.alignment_c) return choices;
  }
  KernelChoices choices{
      p.alignment_a, p.alignment_b, p.alignment_c, base_spec(p.alignment_a, p.alignment_b, p.alignment_c), {}, {}};
  choices.tiles = valid_tiles(choices.base);
  choices.slots.resize(choices.tiles.size());
  run_cache_->choices.push_back(std::move(choices));
  return run_cache_->choices.back();
}

KernelModule& Gemm::module_for(KernelChoices& choices, std::size_t choice, bool wait) {
  {
    std::lock_guard<std::mutex> lock(run_cache_->mutex);  // the run path's common case: loaded, no knob read
    if (choices.slots.modules[choice]) return *choices.slots.modules[choice];
  }
  wait = wait || knobs::flag("GEMMKIT_WAIT_FOR_BEST");
  // Loaded (perhaps compiled) outside the plan's lock: other threads keep running the kernels already loaded.
  const ModuleSources<KernelModule> sources{
      [&](std::size_t i) { return jit::load_kernel_if_built(choices.spec(i)); },
      [&](std::size_t i) { return jit::load_kernel(choices.spec(i)); },
      [&](std::size_t i) { return jit::build_kernel_in_background(choices.spec(i)); }};
  return module_for_run(choices.slots, run_cache_->mutex, choice, wait, sources);
}

void Gemm::wait_for_background() {
  wait_for_background_compiles();
}

namespace {

// Parallel split-K's configuration and slices for a problem (catalog::choose_parallel_split), its slices starting on
// 16-byte boundaries of A's elements.
std::optional<catalog::SplitChoice> parallel_split(const std::vector<TileDescription>& tiles,
                                                   const catalog::ProblemShape& shape, int sm_count, DataType a) {
  return catalog::choose_parallel_split(tiles, shape, sm_count, 128 / bits_of(a));
}

// The problem as the kernel sees it: transposed when it computes D^T.
catalog::ProblemShape kernel_shape(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, bool swap) {
  return {swap ? n : m, swap ? m : n, k, batch};
}

}  // namespace

int Gemm::sm_count_for_choice() const {
  return cuda_device_count() > 0 ? device_info(current_device()).sm_count : catalog::limits_for_cc(cc_).sm_count;
}

std::size_t Gemm::choose_tile(const KernelChoices& choices, const Problem& p, int sm_count) const {
  check_k_split_settings(choices.spec(0));
  if (tile_) return 0;
  const catalog::ProblemShape shape = kernel_shape(p.m, p.n, p.k, p.batch, run_cache_->transposed);
  if (forces_stream_k_kernel()) {
    const std::size_t i = catalog::smallest_stream_k(choices.tiles, shape);
    if (i == choices.tiles.size()) {
      throw ConfigError("Decomposition " + std::string(to_string(decomposition_)) +
                        " needs a Stream-K kernel, and this plan has no valid Stream-K configuration for alignments " +
                        std::to_string(p.alignment_a) + "/" + std::to_string(p.alignment_b) + "/" +
                        std::to_string(p.alignment_c) + ".");
    }
    return i;
  }
  return catalog::choose_tile(choices.tiles, choices.base, shape, sm_count, automatic_split_k());
}

bool Gemm::forces_stream_k_kernel() const {
  return forces_stream_k(decomposition_) && swizzle_ != Swizzle::StreamK;
}

KSplit Gemm::k_split(const KernelChoices& choices, std::size_t choice, const Problem& p, int sm_count) const {
  if (!families::uses_stream_k(choices.spec(choice))) return {Decomposition::DataParallel, 1};
  switch (decomposition_) {
    case Decomposition::Auto: break;
    case Decomposition::SplitK: return {Decomposition::SplitK, splits_};
    default: return {decomposition_, 1};
  }
  if (!automatic_split_k()) return {};
  const catalog::ProblemShape shape = kernel_shape(p.m, p.n, p.k, p.batch, run_cache_->transposed);
  return catalog::choose_k_split(choices.tiles[choice], shape, sm_count);
}

KSplit Gemm::k_split_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                         double beta) {
  return choice_without_running(A, B, C, D, beta).split;
}

bool Gemm::may_split_k_in_parallel(const KernelSpec& base) const {
  return automatic_split() == AutoSplit::Parallel && !tile_ && decomposition_ == Decomposition::Auto &&
         swizzle_ != Swizzle::StreamK && base.family == KernelFamily::Sm90Collective &&
         base.element_accumulator == DataType::f32;
}

Gemm::KernelChoices* Gemm::parallel_choices(KernelChoices& choices, const Problem& p) {
  if (p.batch != 1 || !may_split_k_in_parallel(choices.base)) return nullptr;
  std::lock_guard<std::mutex> lock(run_cache_->mutex);
  if (!choices.parallel) {
    KernelSpec base = choices.base;
    base.split_k_mode = SplitKMode::Parallel;
    std::vector<TileDescription> tiles = valid_tiles(base);
    choices.parallel = std::make_unique<KernelChoices>(KernelChoices{choices.a, choices.b, choices.c, base, tiles, {}});
    choices.parallel->slots.resize(tiles.size());
  }
  return choices.parallel->tiles.empty() ? nullptr : choices.parallel.get();
}

Gemm::RunChoice Gemm::run_choice(const Problem& p, int sm_count) {
  KernelChoices& choices = choices_for(p);
  const std::array<std::int64_t, 5> problem{p.m, p.n, p.k, p.batch, sm_count};
  std::optional<RunChoice> out;
  {
    std::lock_guard<std::mutex> lock(run_cache_->mutex);
    if (choices.last_choice && choices.last_choice->problem == problem) out = choices.last_choice->choice;
  }
  if (!out) {
    out = heuristic_choice(choices, p, sm_count);
    std::lock_guard<std::mutex> lock(run_cache_->mutex);
    choices.last_choice = KernelChoices::LastChoice{problem, *out};
  }
  if (out->parallel != nullptr) return *out;
  // Else a configuration measured by Gemm::tune for this plan and shape bucket (tuning database), when it is built;
  // a set tile or a forced Stream-K kernel is the plan's own choice.
  if (!tile_ && !forces_stream_k_kernel()) {
    if (auto tuned = tuning::tuned_choice(choices.base, choices.tiles, {p.m, p.n, p.k, p.batch}, *choices.tuned)) {
      out->index = *tuned;
      out->split = k_split(choices, *tuned, p, sm_count);
    }
  }
  return *out;
}

Gemm::RunChoice Gemm::heuristic_choice(KernelChoices& choices, const Problem& p, int sm_count) {
  const std::size_t heuristic = choose_tile(choices, p, sm_count);
  RunChoice out{&choices, heuristic, k_split(choices, heuristic, p, sm_count), nullptr, 0, 0};
  // Where the heuristic splits K on the Stream-K kernel, parallel split-K instead when a configuration fits: its slices
  // run independently and one kernel adds them, where Stream-K's CTAs wait on each other's partial tiles. It takes
  // precedence over a tuning database entry (tune() times serial configurations only and refuses these shapes).
  if (out.split.mode == Decomposition::SplitK) {
    if (KernelChoices* parallel = parallel_choices(choices, p)) {
      const catalog::ProblemShape shape = kernel_shape(p.m, p.n, p.k, p.batch, run_cache_->transposed);
      if (auto pick = parallel_split(parallel->tiles, shape, sm_count, types_.a)) {
        out.parallel = parallel;
        out.parallel_index = pick->tile;
        out.slices = pick->slices;
      }
    }
  }
  return out;
}

KernelModule* Gemm::parallel_module(const RunChoice& c, bool wait, bool& building) {
  KernelSlots<KernelModule>& slots = c.parallel->slots;
  const std::size_t i = c.parallel_index;
  std::shared_ptr<const jit::BackgroundBuild> pending;
  {
    std::lock_guard<std::mutex> lock(run_cache_->mutex);
    if (slots.modules[i]) return slots.modules[i].get();
    pending = slots.pending[i];
  }
  wait = wait || knobs::flag("GEMMKIT_WAIT_FOR_BEST");  // as module_for reads it for the serial kernels
  if (wait || (pending && pending->state() == jit::BackgroundBuild::State::done)) {
    return &module_for(*c.parallel, i, /*wait=*/true);
  }
  if (pending) {  // building, or failed (a warning said so): the serial choice meanwhile, or from now on
    building = !pending->finished();
    return nullptr;
  }
  const KernelSpec spec = c.parallel->spec(i);
  if (auto module = jit::load_kernel_if_built(spec)) {
    std::lock_guard<std::mutex> lock(run_cache_->mutex);
    if (!slots.modules[i]) slots.modules[i] = std::move(module);
    return slots.modules[i].get();
  }
  auto build = jit::build_kernel_in_background(spec);
  std::lock_guard<std::mutex> lock(run_cache_->mutex);
  if (!slots.pending[i]) slots.pending[i] = std::move(build);
  building = true;
  return nullptr;
}

KernelModule& Gemm::module_while_parallel_builds(RunChoice& c) {
  KernelChoices& serial = *c.choices;
  const ModuleSources<KernelModule> sources{
      [&](std::size_t i) { return jit::load_kernel_if_built(serial.spec(i)); }, {}, {}};
  if (KernelModule* module = built_module(serial.slots, run_cache_->mutex, c.index, sources)) return *module;
  bool building = false;
  KernelModule* parallel = parallel_module(c, /*wait=*/true, building);  // nothing built: the parallel one, as asked
  c.take_parallel();
  return *parallel;
}

std::vector<KernelSpec> Gemm::run_time_kernels() const {
  const KernelSpec base = base_spec(std::nullopt, std::nullopt, std::nullopt);
  const std::vector<TileDescription> tiles = valid_tiles(base);
  const int sm_count = catalog::limits_for_cc(cc_).sm_count;
  const Shape3 cta = tiles.front().cta_tile();
  // Shapes that reach each branch of the run-time choice: one wave plus one tile (wave-quantized: Stream-K), a long
  // K on few tiles (Stream-K on the smallest tile), decode-like ones (64-row tiles, split-K) and mid-sized problems
  // (the cheapest tile shape).
  const std::vector<catalog::ProblemShape> probes = {{cta[0] * (sm_count + 1), cta[1], 8192, 1},
                                                     {512, 512, 16384, 1},
                                                     {16, 4096, 4096, 1},
                                                     {16, 14336, 4096, 1},
                                                     {1024, 1024, 4096, 1},
                                                     {2048, 2048, 2048, 1},
                                                     {4096, 4096, 512, 1},
                                                     {3000, 3000, 3000, 1}};
  std::vector<std::size_t> chosen = {0};
  // The parallel split-K kernels run() picks where it splits K (SM90; see run_choice).
  const bool parallel = may_split_k_in_parallel(base);
  KernelSpec parallel_base = base;
  parallel_base.split_k_mode = SplitKMode::Parallel;
  const std::vector<TileDescription> parallel_tiles =
      parallel ? valid_tiles(parallel_base) : std::vector<TileDescription>{};
  std::vector<std::size_t> parallel_chosen;
  auto add = [](std::vector<std::size_t>& list, std::size_t i) {
    if (std::find(list.begin(), list.end(), i) == list.end()) list.push_back(i);
  };
  if (!tile_) {
    for (const catalog::ProblemShape& shape : probes) {
      const std::size_t i = catalog::choose_tile(tiles, base, shape, sm_count);
      add(chosen, i);
      if (parallel && catalog::choose_k_split(tiles[i], shape, sm_count).mode == Decomposition::SplitK) {
        if (auto pick = parallel_split(parallel_tiles, shape, sm_count, types_.a)) {
          add(parallel_chosen, pick->tile);
        }
      }
    }
  }
  std::vector<KernelSpec> out;
  for (const std::size_t i : chosen) {
    KernelSpec s = base;
    s.tile = tiles[i];
    out.push_back(s);
  }
  for (const std::size_t i : parallel_chosen) {
    KernelSpec s = parallel_base;
    s.tile = parallel_tiles[i];
    out.push_back(s);
  }
  return out;
}

Gemm::RunChoice Gemm::choice_without_running(const TensorView& A, const TensorView& B, const TensorView* C,
                                             const TensorView& D, double beta) {
  require_operation(catalog::Operation::Gemm, "spec_for(A, B, C, D)");
  return choice_without_running(check_problem(A, B, C, D, beta));
}

Gemm::RunChoice Gemm::choice_without_running(const Problem& p) {
  RunChoice c = run_choice(p, sm_count_for_choice());
  if (c.parallel != nullptr) c.take_parallel();  // what run() launches once the parallel kernel is built
  return c;
}

bool Gemm::may_take_scalar_kernels() const {
  const bool identity_swizzle = swizzle_ == Swizzle::Identity1 || swizzle_ == Swizzle::Identity2 ||
                                swizzle_ == Swizzle::Identity4 || swizzle_ == Swizzle::Identity8;
  return operation_ == catalog::Operation::Gemm && opclass_ == OpClass::TensorOp && !opclass_pinned_ && !tile_ &&
         !math_operation_ && scale_ == ScaleMode::None && identity_swizzle && decomposition_ == Decomposition::Auto &&
         splits_ == 1 && families::simt_types(operand_types(types_)) && (types_.c == types_.d);
}

Gemm& Gemm::plan_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D, double beta) {
  auto twin = [&]() -> Gemm& {
    std::lock_guard<std::mutex> lock(run_cache_->mutex);
    if (!run_cache_->cutlass2_twin) {
      GemmOptions o;
      o.element_a = types_.a, o.element_b = types_.b, o.element_c = types_.c, o.element_d = types_.d;
      o.element_accumulator = types_.accumulator;
      o.layout_a = types_.layout_a, o.layout_b = types_.layout_b, o.layout_c = types_.layout_c;
      o.cc = cc_;
      o.kernel_cc = 80;
      auto plan = std::make_unique<Gemm>(o);
      plan->set_opclass(OpClass::Simt);
      plan->set_swizzling_functor(swizzle_);
      plan->set_bias(bias_);
      plan->set_activation(activation_, activation_parameter_);
      run_cache_->cutlass2_twin = std::move(plan);
    }
    Gemm& plan = *run_cache_->cutlass2_twin;
    // The slope is a run-time argument; the other settings invalidate this plan's run cache, and with it the twin.
    if (plan.activation_parameter_ != activation_parameter_) plan.set_activation(activation_, activation_parameter_);
    return plan;
  };
  Gemm& plan = plan_taking(
      *this, may_take_scalar_kernels(), [&](Gemm& p) { (void)p.check_problem(A, B, C, D, beta); }, twin);
  if (&plan != this) {
    note_once("operands whose leading dimensions or addresses fit none of the " + std::string(to_string(opclass_)) +
              " kernels' vectors run on the CUTLASS 2.x SIMT kernels (scalar loads); pad the leading dimensions to "
              "a multiple of 16 bytes for tensor cores.");
  }
  return plan;
}

KernelSpec Gemm::spec_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                          double beta) {
  if (operation_ == catalog::Operation::Gemm) {
    if (Gemm& plan = plan_for(A, B, C, D, beta); &plan != this) return plan.spec_for(A, B, C, D, beta);
  }
  const RunChoice c = choice_without_running(A, B, C, D, beta);
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
  return {view(types_.a, m, k, types_.layout_a), view(types_.b, k, n, types_.layout_b),
          view(types_.d, m, n, types_.layout_c)};
}

KernelSpec Gemm::spec_for_problem(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch) {
  require_operation(catalog::Operation::Gemm, "spec_for_problem(m, n, k)");
  const auto [A, B, D] = stand_in_tensors(m, n, k, batch);
  return spec_for(A, B, nullptr, D);
}

int Gemm::max_swizzle_for(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                          double beta) {
  require_operation(catalog::Operation::Gemm, "max_swizzle_for(A, B, C, D)");
  const Problem p = check_problem(A, B, C, D, beta);  // checked once: the choice and the swizzle read it
  return swizzle_for(choice_without_running(p), p);
}

int Gemm::swizzle_for(const RunChoice& c, const Problem& p) const {
  if (!catalog::family_of(c.choices->base.family).has_persistent_scheduler()) return 0;
  if (max_swizzle_size_ != 0) return max_swizzle_size_;
  return catalog::choose_max_swizzle(c.choices->tiles[c.index],
                                     kernel_shape(p.m, p.n, p.k, p.batch, run_cache_->transposed));
}

std::string Gemm::running_kernel_name(const TensorView& A, const TensorView& B, const TensorView* C,
                                      const TensorView& D, double beta) {
  require_operation(catalog::Operation::Gemm, "running_kernel_name(A, B, C, D)");
  const RunChoice c = run_choice(check_problem(A, B, C, D, beta), sm_count_for_choice());
  const std::size_t choice = c.index;
  KernelSlots<KernelModule>& slots = c.choices->slots;
  if (c.parallel != nullptr) {
    std::shared_ptr<const jit::BackgroundBuild> pending;
    {
      std::lock_guard<std::mutex> lock(run_cache_->mutex);
      const KernelSlots<KernelModule>& parallel = c.parallel->slots;
      if (parallel.modules[c.parallel_index]) return parallel.modules[c.parallel_index]->kernel_name();
      pending = parallel.pending[c.parallel_index];
    }
    if (pending && !pending->finished()) {  // the serial kernel run() lends (module_while_parallel_builds), if loaded
      const ModuleSources<KernelModule> loaded_only{
          [](std::size_t) { return std::shared_ptr<KernelModule>(); }, {}, {}};
      const KernelModule* lent = built_module(slots, run_cache_->mutex, choice, loaded_only);
      return lent != nullptr ? lent->kernel_name() : "";
    }
  }
  // Otherwise run() launches the serial choice (also once a parallel build failed).
  std::lock_guard<std::mutex> lock(run_cache_->mutex);
  if (slots.modules[choice]) return slots.modules[choice]->kernel_name();
  const std::size_t stand_in = slots.stand_in[choice];
  if (slots.pending[choice] && stand_in != KernelSlots<KernelModule>::kNone) {
    return slots.modules[stand_in]->kernel_name();
  }
  return "";
}

Gemm::Problem Gemm::check_problem(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                                  double beta) {
  using detail::MatrixOperand;
  Problem p;
  p.a = detail::check_operand(A, "A", types_.a, types_.layout_a);
  p.b = detail::check_operand(B, "B", types_.b, types_.layout_b);
  p.d = detail::check_operand(D, "D", types_.d, types_.layout_c);
  p.c = p.d;
  if (C != nullptr) {
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
      if (detail::fitting_alignment(x, bytes_of(type), &candidates[i], 1) != 0) return i;
    }
    throw TensorError(std::string("Tensor ") + name + ": its leading dimension " + std::to_string(x.ld) +
                      (x.batch > 1 ? ", batch stride " + std::to_string(x.batch_stride) : std::string()) +
                      ", contiguous extent " + std::to_string(x.inner) + " or address is not a multiple of " +
                      std::to_string(candidates.back()) + " elements (" +
                      std::to_string(candidates.back() * bytes_of(type)) + " bytes), the narrowest " +
                      std::string(to_string(opclass_)) + " kernels for " + std::string(to_string(type)) +
                      " accept. Pad the leading dimension, or set opclass = Simt.");
  };
  const auto& alignments_c = run_cache_->alignments_c;
  const int align_a = run_cache_->alignments_a[fit(a, types_.a, run_cache_->alignments_a, "A")];
  const int align_b = run_cache_->alignments_b[fit(b, types_.b, run_cache_->alignments_b, "B")];
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

std::optional<detail::MatrixOperand> Gemm::check_bias_operand(const TensorView* bias, const Problem& p) const {
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
  return detail::check_vector(*bias, "bias", types_.c, per_row ? p.m : p.n, per_row ? "row" : "column");
}

std::pair<std::optional<detail::MatrixOperand>, std::optional<detail::MatrixOperand>> Gemm::check_scale_operands(
    const RunOptions& options, const Problem& p) const {
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

void Gemm::run(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D, double alpha,
               double beta, const RunOptions& options) {
  require_operation(catalog::Operation::Gemm, "run(A, B, C, D)");
  if (Gemm& plan = plan_for(A, B, C, D, beta); &plan != this) {
    plan.run(A, B, C, D, alpha, beta, options);
    return;
  }
  // Check every tensor against the plan; nothing is written before all checks pass.
  const Problem p = check_problem(A, B, C, D, beta);
  const std::optional<detail::MatrixOperand> bias = check_bias_operand(options.bias, p);
  const auto [row_scale, column_scale] = check_scale_operands(options, p);
  const int device = current_device();
  for (const auto& [tensor, name] : {std::pair{&A, "A"},
                                     {&B, "B"},
                                     {&D, "D"},
                                     {C, "C"},
                                     {options.bias, "bias"},
                                     {options.row_scale, "row_scale"},
                                     {options.column_scale, "column_scale"}}) {
    if (tensor != nullptr && tensor->on_device() && tensor->device != device) {
      throw TensorError(std::string("Tensor ") + name + " lives on CUDA device " + std::to_string(tensor->device) +
                        " but the current device is " + std::to_string(device) +
                        "; call cudaSetDevice first or move the tensor.");
    }
  }
  if (p.m == 0 || p.n == 0 || p.batch == 0) return;  // an empty D: nothing to compute, nothing to write

  // Choose the kernel for these alignments (resolved once per alignment triple) and this problem's shape.
  const int sm_count = device_info(device).sm_count;
  RunChoice c = run_choice(p, sm_count);
  bool parallel_building = false;
  KernelModule* module = c.parallel != nullptr ? parallel_module(c, options.wait_for_best, parallel_building) : nullptr;
  if (module != nullptr) {
    c.take_parallel();
  } else if (parallel_building) {
    module = &module_while_parallel_builds(c);
  } else {
    module = &module_for(*c.choices, c.index, options.wait_for_best);
  }
  const KernelChoices& choices = *c.choices;
  if (options.print_module) std::fputs(render(choices.spec(c.index)).text.c_str(), stdout);
  if (options.bias != nullptr && options.bias->on_device()) {
    const auto bytes =
        static_cast<std::uintptr_t>(catalog::family_of(choices.base.family).bias_alignment_bytes(choices.base));
    if (reinterpret_cast<std::uintptr_t>(options.bias->data) % bytes != 0) {
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
  if (bias) gemm.bias = operand(*bias, *options.bias, types_.c);
  if (row_scale) gemm.row_scale = operand(*row_scale, *options.row_scale, DataType::f32);
  if (column_scale) gemm.column_scale = operand(*column_scale, *options.column_scale, DataType::f32);
  gemm.d_has_gaps = p.d.span != p.d.rows * p.d.cols * p.d.batch;
  gemm.m = p.m;
  gemm.n = p.n;
  gemm.k = p.k;
  gemm.batch = p.batch;
  gemm.transposed = run_cache_->transposed;
  gemm.alpha = alpha;
  gemm.beta = beta;
  gemm.activation_parameter = activation_parameter_;
  gemm.raster_order = raster_order_;
  {
    // A stand-in (the chosen kernel still compiling) runs unswizzled unless the plan sets a swizzle: the choice's
    // swizzle could pad the stand-in's tiles.
    std::lock_guard<std::mutex> lock(run_cache_->mutex);
    const bool chosen = c.choices->slots.modules[c.index].get() == module;
    gemm.max_swizzle_size = chosen ? swizzle_for(c, p) : std::max(max_swizzle_size_, 1);
  }
  gemm.k_split = c.split;
  gemm.reduction_mode = reduction_mode_;
  gemm.device = device;
  gemm.sm_count = sm_count;
  runtime::launch(*module, gemm, options.stream, options.sync, options.workspace);
}

}  // namespace gemmkit

namespace gemmkit {
// Conv2d's settings go through the same check (src/api/conv2d.cpp).
template void Gemm::change_checked(std::optional<IteratorAlgorithm>&, std::optional<IteratorAlgorithm>);
template void Gemm::change_checked(std::optional<StrideSupport>&, std::optional<StrideSupport>);
}  // namespace gemmkit
