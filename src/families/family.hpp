// src/families/family.hpp: the interface of a kernel family. A family is one unit in src/families/ (its tile table
// and default, its rules, its kernel name, its template's placeholders), one template in templates/ and its device
// glue in device/include/gemmkit/; catalog/ lists the families of each architecture, codegen/ renders them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/types.hpp"

namespace gemmkit::families {

// A plan's operand element types and layouts (the kernel's, after any transposition).
struct OperandTypes {
  DataType a, b, c, d, accumulator;
  Layout layout_a, layout_b, layout_c;
};

// What a GPU of a compute capability allows; from the device when there is one, else from catalog::limits_for_cc.
struct DeviceLimits {
  int cc = 0;
  int sm_count = 0;
  int max_smem_per_block = 0;  // bytes, the opt-in maximum
};

// Values for a template's {{placeholder}}s, in the order a reader meets them.
using Placeholders = std::vector<std::pair<std::string, std::string>>;

class Family {
 public:
  virtual ~Family() = default;

  virtual KernelFamily id() const = 0;
  // The kernel generation it builds (KernelSpec::kernel_cc): 80 for CUTLASS 2.x kernels, 90 for 3.x.
  virtual int kernel_cc() const = 0;
  // templates/<template_name()>, which includes device/include/<glue_header()>.
  virtual std::string_view template_name(const KernelSpec& spec) const = 0;
  virtual std::string_view glue_header(const KernelSpec& spec) const = 0;

  // Whether it has kernels for these operands with this opcode class.
  virtual bool supports(OpClass opclass, const OperandTypes& types) const = 0;
  // Vector widths (elements) it accepts for an operand of `element`, widest first.
  virtual std::vector<int> operand_alignments(OpClass opclass, DataType element, const OperandTypes& types) const = 0;
  // Its configurations, the default first, no duplicates; A/B alignments may select other mainloops.
  virtual std::vector<TileDescription> tile_descriptions(OpClass opclass, const OperandTypes& types,
                                                         const DeviceLimits& limits, int alignment_a,
                                                         int alignment_b) const = 0;
  // The swizzles a plan may set.
  virtual std::vector<Swizzle> swizzles(OpClass opclass) const = 0;
  // True when its kernel computes D^T = B^T A^T for these operands (the plan then swaps A and B).
  virtual bool computes_transposed(OpClass opclass, const OperandTypes& types) const = 0;
  // Whether its tile scheduler takes a raster order and a swizzle size at run time.
  virtual bool has_persistent_scheduler() const = 0;
  // The alignment, in bytes, a bias vector's address needs.
  virtual int bias_alignment_bytes(const KernelSpec& spec) const = 0;

  // Every rule a spec must satisfy before nvcc runs: the only copy. Throws ConfigError naming the rule.
  virtual void validate(const KernelSpec& spec, const DeviceLimits& limits) const = 0;
  // The kernel's name in the reference's format (plus ours for the epilogue), unique per kernel.
  virtual std::string kernel_name(const KernelSpec& spec) const = 0;
  // The template's placeholders for a valid spec.
  virtual Placeholders placeholders(const KernelSpec& spec) const = 0;
  // Whether its kernel for `spec` takes the activation, bias and scale vectors at launch (gk_gemm_args.activation,
  // bias_mode, row_scale, column_scale) instead of compiling them in: specs that differ only there share that kernel.
  virtual bool epilogue_at_launch(const KernelSpec&) const { return false; }
  // A configuration of the same computation whose kernel builds in less time (gemmkit's lean epilogue), which run()
  // launches while spec's own kernel builds in the background; nullopt: none.
  virtual std::optional<TileDescription> quick_twin(const KernelSpec&) const { return std::nullopt; }
  // The same tile on a mainloop of gemmkit's that runs it faster than the collective builder's (FP8's overlapped
  // promotion), which the shape heuristics take in place of `spec`'s where the plan's list holds it; nullopt: none.
  virtual std::optional<TileDescription> own_mainloop_twin(const KernelSpec&) const { return std::nullopt; }
  // Whether it builds GEMM kernels that split K in parallel (partial sums, then a reduction kernel with the epilogue)
  // for run() to choose on its own; Conv2d families offer parallel split-K as an explicit mode instead.
  virtual bool splits_k_in_parallel() const { return false; }
  // The bytes its kernel moves a visitor-tree tensor of this node in (address, leading dimension and batch stride
  // must be multiples), or 0 for element-wise access.
  virtual int visitor_access_bytes(const KernelSpec&, const epilogue::Node&) const { return 0; }

  // Whether its glue builds a kernel as a cubin plus a host module (gemmkit/split_entry.hpp) when asked
  // (GEMMKIT_SPLIT_BUILD: the SM90 families); the others always build one module in one nvcc pass.
  virtual bool splittable(const KernelSpec&) const { return false; }
};

// The families, each defined in its own unit; catalog/ says which architectures use them.
const Family& sm80_universal();
const Family& sm90_collective();
const Family& sm80_grouped();
const Family& sm90_grouped();
const Family& sm80_conv2d();
const Family& sm90_conv2d();

}  // namespace gemmkit::families
