// include/gemmkit/plan.hpp: Plan, what every plan (Gemm, GroupedGemm, Conv2d) is configured with: element types,
// layouts, opclass, tile, math operation, swizzle and activation; and its kernel, as a spec, source or build.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gemmkit/errors.hpp"
#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/results.hpp"
#include "gemmkit/tensor.hpp"
#include "gemmkit/types.hpp"

namespace gemmkit {

namespace selection {
class PlanCore;
}
namespace catalog {
enum class Operation;
}

// What a plan is declared from. Per operand, a representative tensor wins over element_X/layout_X, which win
// over the generic element/layout (giving both a tensor and element_X for one operand is an error).
struct GemmOptions {
  std::optional<DataType> element, element_a, element_b, element_c, element_d, element_accumulator;
  std::optional<Layout> layout, layout_a, layout_b, layout_c;
  const TensorView* A = nullptr;
  const TensorView* B = nullptr;
  const TensorView* C = nullptr;
  const TensorView* D = nullptr;
  std::optional<int> cc;  // the target GPU (e.g. 80, 90); default: the current device's
  // The kernel generation: 80 = CUTLASS 2.x kernels (also on an SM90 GPU), 90 = CUTLASS 3.x. Default: the best
  // for cc.
  std::optional<int> kernel_cc;
};

// A named tensor or scalar an epilogue visitor tree reads or writes (RunOptions::visitor_args).
struct VisitorArgument {
  std::string name;
  std::optional<TensorView> tensor = std::nullopt;  // tensors: inputs, extra outputs and reductions
  double value = 0.0;                               // scalars
};

struct RunOptions {
  cudaStream_t stream = nullptr;     // device tensors run on this stream; host tensors are staged through it
  bool sync = true;                  // wait for the stream before returning (host outputs always land before return)
  bool print_module = false;         // print the generated source before running
  const TensorView* bias = nullptr;  // the bias vector when the plan has one (set_bias): m (per row) or n elements
  // The f32 scale vectors when the plan has them (set_scale): row_scale has m elements (one per output row, e.g. A's
  // per-row FP8 dequantization scales), column_scale n (one per output column, e.g. B's per-column scales).
  const TensorView* row_scale = nullptr;
  const TensorView* column_scale = nullptr;
  // The f32 block scales when the plan has them (set_block_scaling(Blockwise)), laid out as torch._scaled_mm takes
  // them (KB = ceil(K / 128), NB = ceil(N / 128); a leading batch extent for batched problems):
  //   scale_a: M x KB, M-major (strides 1, M): one per row of A and 128-wide K block; M a multiple of 4;
  //   scale_b: NB x KB, row-major (strides KB, 1): one per 128 x 128 block of B^T (N x K).
  const TensorView* scale_a = nullptr;
  const TensorView* scale_b = nullptr;
  // A device buffer lent as the kernel's workspace (frameworks with their own allocator); by default each launch
  // takes one from gemmkit's stream-ordered pool. It must not be in use by another launch in flight.
  Workspace workspace = {};
  // When the shape asks for a kernel that is not built yet, compile it and wait (benchmarks). By default run()
  // launches a kernel already built and compiles the better one in the background (also: GEMMKIT_WAIT_FOR_BEST=1).
  bool wait_for_best = false;
  // The tensors and scalars of the plan's epilogue visitor tree, by name. Scalars named alpha and beta default to
  // run()'s; "C" and "D" here stand for run()'s C and D.
  std::vector<VisitorArgument> visitor_args = {};
};

// The configuration every kind of plan has. A plan is not copyable (its kernels are loaded once); it moves.
class Plan {
 public:
  virtual ~Plan();
  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;

  int cc() const;
  // The kernel generation the plan uses (80 or 90).
  int kernel_cc() const { return spec().kernel_cc; }
  DataType element_a() const;
  DataType element_b() const;
  DataType element_c() const;
  DataType element_d() const;
  DataType element_accumulator() const;
  Layout layout_a() const;
  Layout layout_b() const;
  Layout layout_c() const;

  OpClass opclass() const;
  // Throws ConfigError naming the combination when this opclass has no kernels for the plan's types/layouts.
  void set_opclass(OpClass opclass);
  std::vector<OpClass> opclasses() const;

  // Every valid configuration for the plan (default first, no duplicates).
  std::vector<TileDescription> tile_descriptions() const;
  // The configuration set on the plan, if any (else the default is chosen per alignment).
  const std::optional<TileDescription>& tile_description() const;
  // Validates before storing; throws ConfigError naming the rule.
  void set_tile_description(const TileDescription& tile);
  // Merges some fields onto the current configuration (or the default one), validates, stores.
  void update_tile_description(const TileDescriptionUpdate& update);

  // The math operation of the plan's kernels (the reference's plan.math_operation); nullopt: the family's default
  // (multiply_add; saturating for 8-bit integers). tile_descriptions() and run() keep to it. An operation only the
  // CUTLASS 2.x kernels offer (3xTF32 and the other fast-f32 modes) switches an SM90 plan that was not given kernel_cc
  // to those kernels (kernel_cc() 80, said once on stderr); given kernel_cc=90, or where no kernel offers it, it is a
  // ConfigError naming the operations on offer. Unsetting it returns to the plan's own generation.
  const std::optional<MathOperation>& math_operation() const;
  void set_math_operation(std::optional<MathOperation> math);
  // The math operations the plan's opclass offers for its operands, the default first (on an SM90 plan without
  // kernel_cc, also those of the 2.x kernels).
  std::vector<MathOperation> math_operations() const;

  Swizzle swizzling_functor() const;
  void set_swizzling_functor(Swizzle swizzle);
  std::vector<Swizzle> swizzling_functors() const;

  Activation activation() const;
  // The parameter is the leaky_relu slope (ignored by the others); it is a run-time argument (no recompile).
  void set_activation(Activation activation, double parameter = 0.01);
  double activation_parameter() const;
  static std::vector<Activation> activations();

  // The kernel for the widest alignments (or the given ones): a plain value, no I/O. A tile given here is
  // validated and stored in the plan, as the reference does.
  KernelSpec construct(const std::optional<TileDescription>& tile = std::nullopt,
                       std::optional<int> alignment_a = std::nullopt, std::optional<int> alignment_b = std::nullopt,
                       std::optional<int> alignment_c = std::nullopt);
  // Like construct() without storing anything.
  KernelSpec spec(std::optional<int> alignment_a = std::nullopt, std::optional<int> alignment_b = std::nullopt,
                  std::optional<int> alignment_c = std::nullopt) const;
  std::string kernel_name() const { return spec().name(); }
  KernelSource render_source() const;

  // Generates and compiles the kernel (through the on-disk cache); needs nvcc, not a GPU.
  CompiledKernel compile(const std::optional<TileDescription>& tile = std::nullopt);

  // Blocks until every kernel a run() chose to compile in the background is built (or failed); later runs use them.
  static void wait_for_background();

 protected:
  // Declares a plan of one kind (its kernel families); ConfigError when no kernel fits the operands.
  Plan(const GemmOptions& options, catalog::Operation operation);
  // A plan made from another's core (a copy with a tile set, a twin on other kernels).
  explicit Plan(std::unique_ptr<selection::PlanCore> core);

  // Sets one configuration field, keeps it only if the plan still validates, and drops stale kernels.
  template <class Field>
  void change_checked(Field& field, Field value);

  std::unique_ptr<selection::PlanCore> core_;

 private:
  // set_math_operation's choice of kernel generation for `math`, before the plan is validated.
  void choose_math_operation(std::optional<MathOperation> math);
};

}  // namespace gemmkit
