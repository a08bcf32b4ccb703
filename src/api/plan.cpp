// src/api/plan.cpp: what every plan shares: operand inference, cc and kernel generation, opclass, tiles, math
// operation, swizzle and activation, and the plan's kernel as a spec, source or build.
#include "gemmkit/plan.hpp"

#include <algorithm>
#include <utility>

#include "api/plan_internal.hpp"
#include "catalog/catalog.hpp"
#include "families/rules.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/errors.hpp"
#include "gemmkit/jit.hpp"
#include "tuning/choice.hpp"
#include "util/notes.hpp"

namespace gemmkit {
namespace {

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
  if (why.empty() && is_fp8(types.a) && target.operation == catalog::Operation::Conv2d) {
    why = "FP8 operands (e4m3, e5m2) are supported by Gemm and GroupedGemm plans (SM90), not by Conv2d plans.";
  }
  if (!why.empty()) throw ConfigError(why);
}

}  // namespace

Plan::Plan(const GemmOptions& o, catalog::Operation operation) {
  selection::PlanConfig config;
  config.operation = operation;
  families::OperandTypes& t = config.types;
  t.a = resolve_element("A", o.A, o.element_a, o.element);
  t.b = resolve_element("B", o.B, o.element_b, o.element);
  t.c = resolve_element("C", o.C, o.element_c, o.element);
  t.d = resolve_element("D", o.D, o.element_d, o.element);
  // The reference accumulates in C's type by default; FP8 math accumulates in f32 only.
  t.accumulator = o.element_accumulator ? *o.element_accumulator : is_fp8(t.a) ? DataType::f32 : t.c;
  t.layout_a = resolve_layout("A", o.A, o.layout_a, o.layout);
  t.layout_b = resolve_layout("B", o.B, o.layout_b, o.layout);
  t.layout_c = resolve_layout("C", o.C, o.layout_c, o.layout);
  config.cc = resolve_cc(o.cc);
  if (o.kernel_cc) {
    const int k = *o.kernel_cc;
    if ((k != 80 && k != 90) || k > config.cc || (k == 90 && config.cc >= 100)) {
      throw ConfigError("kernel_cc " + std::to_string(k) + " is not available for cc " + std::to_string(config.cc) +
                        ": use 80 (CUTLASS 2.x kernels, any SM80+ GPU) or 90 (CUTLASS 3.x kernels, SM90 only).");
    }
    config.kernel_cc = k;
  }
  const auto available = catalog::supported_opclasses(config.target(), t);
  if (available.empty()) {
    throw_fp8_rule(config.target(), t, OpClass::TensorOp);
    const auto nearest = nearest_settings(t, catalog::nearest_supported(config.target(), t));
    std::string message = "No kernel configuration found for supported data type and layout combination " +
                          combination_text(t) + " with C=" + std::string(to_string(t.c)) +
                          ", D=" + std::string(to_string(t.d)) + " on SM" + std::to_string(config.cc) +
                          ". Supported: f16/bf16 (accumulate f32; f16 also f16), f32, f64, s8 -> s32 (tensor cores: "
                          "A row-major, B column-major).";
    for (std::size_t i = 0; i < nearest.size(); ++i) {
      message +=
          (i == 0 ? " The nearest combination with a kernel sets " : ", ") + nearest[i].option + "=" + nearest[i].value;
    }
    throw ConfigError(nearest.empty() ? message : message + ".", nearest);
  }
  config.opclass = available.front();
  core_ = make_core(config);
  core_->invalidate();
}

Plan::Plan(std::unique_ptr<selection::PlanCore> core) : core_(std::move(core)) {}

Plan::~Plan() = default;
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;

std::unique_ptr<selection::PlanCore> make_core(const selection::PlanConfig& config) {
  auto lookup = [](const KernelSpec& base, const std::vector<TileDescription>& tiles, const selection::ProblemKey& p,
                   selection::TunedMemo& memo) {
    return tuning::tuned_choice(base, tiles, {p.m, p.n, p.k, p.batch}, memo);
  };
  return std::make_unique<selection::PlanCore>(config, lookup);
}

int Plan::cc() const {
  return core_->config.cc;
}
DataType Plan::element_a() const {
  return core_->config.types.a;
}
DataType Plan::element_b() const {
  return core_->config.types.b;
}
DataType Plan::element_c() const {
  return core_->config.types.c;
}
DataType Plan::element_d() const {
  return core_->config.types.d;
}
DataType Plan::element_accumulator() const {
  return core_->config.types.accumulator;
}
Layout Plan::layout_a() const {
  return core_->config.types.layout_a;
}
Layout Plan::layout_b() const {
  return core_->config.types.layout_b;
}
Layout Plan::layout_c() const {
  return core_->config.types.layout_c;
}
OpClass Plan::opclass() const {
  return core_->config.opclass;
}
const std::optional<TileDescription>& Plan::tile_description() const {
  return core_->config.tile;
}
const std::optional<MathOperation>& Plan::math_operation() const {
  return core_->config.math_operation;
}
Swizzle Plan::swizzling_functor() const {
  return core_->config.swizzle;
}
Activation Plan::activation() const {
  return core_->config.activation;
}
double Plan::activation_parameter() const {
  return core_->config.activation_parameter;
}

std::vector<OpClass> Plan::opclasses() const {
  return catalog::supported_opclasses(core_->config.target(), core_->config.types);
}

void Plan::set_opclass(OpClass opclass) {
  const auto available = opclasses();
  if (std::find(available.begin(), available.end(), opclass) == available.end()) {
    const auto t = core_->config.types;
    throw_fp8_rule(core_->config.target(), t, opclass);
    throw ConfigError("Unsupported operation class " + std::string(to_string(opclass)) + " for CC " +
                      std::to_string(core_->config.cc) + " and data type combination (" + std::string(to_string(t.a)) +
                      ", " + std::string(to_string(t.b)) + ", " + std::string(to_string(t.accumulator)) +
                      ") and layout combination (" + std::string(to_string(t.layout_a)) + ", " +
                      std::string(to_string(t.layout_b)) + ").");
  }
  core_->config.opclass_pinned = true;
  if (opclass == core_->config.opclass) return;
  if (core_->config.math_operation) {
    const OpClass before = std::exchange(core_->config.opclass, opclass);
    const auto ops = math_operations();
    core_->config.opclass = before;
    if (std::find(ops.begin(), ops.end(), *core_->config.math_operation) == ops.end()) {
      throw ConfigError("Math operation " + std::string(to_string(*core_->config.math_operation)) + " has no " +
                        std::string(to_string(opclass)) + " kernels; unset math_operation first (None).");
    }
  }
  core_->config.opclass = opclass;
  core_->config.tile.reset();  // tiles of one opclass mean nothing to the other
  if (core_->config.opclass == OpClass::Simt && core_->config.swizzle == Swizzle::StreamK)
    core_->config.swizzle = Swizzle::Identity1;
  core_->invalidate();
}

std::vector<TileDescription> Plan::tile_descriptions() const {
  const auto t = core_->config.types;
  std::vector<TileDescription> out = catalog::tile_descriptions(core_->config.target(), core_->config.opclass, t,
                                                                catalog::limits_for_cc(core_->config.cc));
  if (core_->config.math_operation) {
    std::erase_if(out, [&](const TileDescription& td) { return td.math_operation != *core_->config.math_operation; });
  }
  if ((core_->config.visitor && !core_->config.visitor_plain) || core_->config.block_scaling != BlockScaling::None) {
    // A tree's buffers share the block's shared memory with the mainloop, and a block-scaled mainloop takes tiles as
    // wide as B's scale blocks: only the tiles they fit are configurations.
    const KernelSpec base = spec();
    const auto limits = catalog::limits_for_cc(core_->config.cc);
    std::erase_if(out, [&](const TileDescription& td) {
      KernelSpec with_tile = base;
      with_tile.tile = td;
      try {
        catalog::validate(with_tile, limits);
        return false;
      } catch (const ConfigError&) {
        return true;
      }
    });
  }
  return out;
}

std::vector<MathOperation> Plan::math_operations() const {
  const auto t = core_->config.types;
  const auto limits = catalog::limits_for_cc(core_->config.cc);
  const catalog::Target own = core_->config.kernel_cc_for_math
                                  ? catalog::Target{core_->config.cc, std::nullopt, core_->config.operation}
                                  : core_->config.target();
  std::vector<MathOperation> out = catalog::math_operations(own, core_->config.opclass, t, limits);
  if (core_->config.cc >= 90 && (!core_->config.kernel_cc || core_->config.kernel_cc_for_math)) {
    try {
      for (MathOperation math : catalog::math_operations({core_->config.cc, 80, core_->config.operation},
                                                         core_->config.opclass, t, limits)) {
        if (std::find(out.begin(), out.end(), math) == out.end()) out.push_back(math);
      }
    } catch (const ConfigError&) {
      // no 2.x kernel for this opclass: the plan's own generation's operations are all there are
    }
  }
  return out;
}

void Plan::set_math_operation(std::optional<MathOperation> math) {
  // The rest of the plan may refuse what the operands offer (FP8 fast accumulation beside block scales): the plan
  // keeps its former configuration then.
  const selection::PlanConfig before = core_->config;
  try {
    choose_math_operation(math);
    (void)spec();
  } catch (const ConfigError&) {
    core_->config = before;
    core_->invalidate();
    throw;
  }
}

void Plan::choose_math_operation(std::optional<MathOperation> math) {
  const auto t = core_->config.types;
  const auto limits = catalog::limits_for_cc(core_->config.cc);
  auto offers = [&](const catalog::Target& where) {
    try {
      const auto ops = catalog::math_operations(where, core_->config.opclass, t, limits);
      return !math || std::find(ops.begin(), ops.end(), *math) != ops.end();
    } catch (const ConfigError&) {
      return false;
    }
  };
  const bool own_generation = core_->config.kernel_cc_for_math
                                  ? offers({core_->config.cc, std::nullopt, core_->config.operation})
                                  : offers(core_->config.target());
  if (core_->config.kernel_cc_for_math && own_generation) {  // back to the generation the options chose
    core_->config.kernel_cc.reset();
    core_->config.kernel_cc_for_math = false;
  } else if (!own_generation && !offers(core_->config.target())) {
    const bool older_offers =
        core_->config.cc >= 90 && !core_->config.kernel_cc && offers({core_->config.cc, 80, core_->config.operation});
    if (!older_offers) {
      std::string offered;
      for (MathOperation m : math_operations()) offered += (offered.empty() ? "" : ", ") + std::string(to_string(m));
      const bool pinned = core_->config.kernel_cc && *core_->config.kernel_cc >= 90 &&
                          offers({core_->config.cc, 80, core_->config.operation});
      throw ConfigError("Math operation " + std::string(to_string(*math)) + " is not available for " +
                        combination_text(t) + " " + std::string(to_string(core_->config.opclass)) + " kernels on SM" +
                        std::to_string(core_->config.cc) +
                        (pinned ? " with kernel_cc 90: CUTLASS 3.x kernels have one math operation. Leave kernel_cc "
                                  "unset (or pass kernel_cc=80) for the CUTLASS 2.x kernels, which offer it"
                                : std::string(". Available: ") + offered + "; or leave math_operation unset") +
                        ".");
    }
    core_->config.kernel_cc = 80;
    core_->config.kernel_cc_for_math = true;
    note_once("math operation " + std::string(to_string(*math)) + " is offered by CUTLASS 2.x kernels only; this SM" +
              std::to_string(core_->config.cc) +
              " plan uses them (kernel_cc 80). Pass kernel_cc=80 to choose them explicitly.");
  }
  core_->config.math_operation = math;
  if (core_->config.tile && math && core_->config.tile->math_operation != *math) core_->config.tile.reset();
  core_->invalidate();
}

void Plan::set_tile_description(const TileDescription& tile) {
  KernelSpec s = spec();
  s.tile = tile;
  catalog::validate(s, catalog::limits_for_cc(core_->config.cc));
  core_->config.tile = tile;
  catalog::describe_instruction(*core_->config.tile, core_->config.opclass, core_->config.types);
  core_->invalidate();
}

void Plan::update_tile_description(const TileDescriptionUpdate& update) {
  set_tile_description(update.applied_to(core_->config.tile ? *core_->config.tile : spec().tile));
}

std::vector<Swizzle> Plan::swizzling_functors() const {
  return catalog::family_for(core_->config.target(), core_->config.opclass, core_->config.types)
      .swizzles(core_->config.opclass);
}

void Plan::set_swizzling_functor(Swizzle swizzle) {
  const auto allowed = swizzling_functors();
  if (std::find(allowed.begin(), allowed.end(), swizzle) == allowed.end()) {
    KernelSpec s = spec();
    s.swizzle = swizzle;
    catalog::validate(
        s, catalog::limits_for_cc(core_->config.cc));  // the family's rule says why it offers no such swizzle
    throw Error("internal error: the " + std::string(to_string(s.family)) + " family offers no " +
                std::string(to_string(swizzle)) + " but its rules accept it");
  }
  change_checked(core_->config.swizzle, swizzle);  // with an explicit tile, Stream-K needs it to be cooperative
}

std::vector<Activation> Plan::activations() {
  std::vector<Activation> all;
  for (const auto& row : enum_rows<Activation>()) all.push_back(row.value);
  return all;
}

void Plan::set_activation(Activation activation, double parameter) {
  const selection::PlanConfig& c = core_->config;
  core_->refuse_beside_plain_tree(activation != c.activation || parameter != c.activation_parameter, "activation");
  change_checked(core_->config.activation, activation);
  core_->config.activation_parameter = parameter;  // a run-time argument: the kernel stays
}

KernelSpec Plan::spec(std::optional<int> alignment_a, std::optional<int> alignment_b,
                      std::optional<int> alignment_c) const {
  return core_->spec(alignment_a, alignment_b, alignment_c);
}

KernelSpec Plan::construct(const std::optional<TileDescription>& tile, std::optional<int> alignment_a,
                           std::optional<int> alignment_b, std::optional<int> alignment_c) {
  if (tile) set_tile_description(*tile);
  return spec(alignment_a, alignment_b, alignment_c);
}

KernelSource Plan::render_source() const {
  return render(spec());
}

CompiledKernel Plan::compile(const std::optional<TileDescription>& tile) {
  return build_kernel(construct(tile));
}

void Plan::wait_for_background() {
  wait_for_background_compiles();
}

}  // namespace gemmkit
