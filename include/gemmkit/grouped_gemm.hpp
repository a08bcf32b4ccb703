// include/gemmkit/grouped_gemm.hpp: GroupedGemm, many GEMMs of different extents in one launch (SM80 and SM90).
#pragma once

#include <memory>
#include <optional>
#include <span>

#include "gemmkit/errors.hpp"
#include "gemmkit/plan.hpp"

namespace gemmkit {

class KernelModule;
namespace detail {
struct MatrixOperand;
}
namespace runtime {
class PinnedMetadata;
}
namespace selection {
struct KernelChoices;
}

// A grouped GEMM plan: D_g = act(alpha * A_g @ B_g + beta * C_g) for every group g, in one launch. It is declared and
// configured like a Gemm (element types, layouts, opclass, tile descriptions, activation, cc / kernel_cc) and picks
// from the grouped kernel families: CUTLASS 3.x ptr-array grouped kernels on SM90, 2.x GemmGrouped otherwise (or with
// kernel_cc = 80). Swizzles, Stream-K and bias do not apply. Thread-safe like Gemm::run.
class GroupedGemm : public Plan {
 public:
  explicit GroupedGemm(const GemmOptions& options);
  ~GroupedGemm() override;
  GroupedGemm(GroupedGemm&&) noexcept;
  GroupedGemm& operator=(GroupedGemm&&) noexcept;

  // The list form: group g reads A[g] (m x k), B[g] (k x n), C[g] (m x n, or none when C is empty and beta is 0) and
  // writes D[g]; each group has its own extents and strides (2-D tensors). A group with m, n or k of 0 leaves its D
  // untouched. Every tensor is checked first: a TensorError names the group and the operand, and nothing runs.
  // Problem sizes, pointers and strides reach the GPU in one copy from a pinned buffer the plan reuses. Host tensors
  // are staged through the GPU.
  void run(std::span<const TensorView> A, std::span<const TensorView> B, std::span<const TensorView> C,
           std::span<const TensorView> D, double alpha = 1.0, double beta = 0.0, const RunOptions& options = {});

  // FP8 block scales applied in the mainloop (SM90, FP8 A and B; the MoE form only): Blockwise takes one f32 scale
  // per row of A and 128-deep K block, and one per 128 x 128 block of each group's B^T (DeepSeek-V3's format).
  BlockScaling block_scaling() const;
  void set_block_scaling(BlockScaling scaling);

  // The MoE form (as torch._grouped_mm): A is [total_m, k] with the groups stacked along M, B is [G, k, n] (row-major
  // B) or [G, n, k] (column-major B: transposed weights), C (optional) and D are [total_m, n]; offsets is a device
  // int32 tensor [G] of cumulative row ends. The GPU reads the group sizes: no host synchronisation, capturable in
  // a CUDA graph. Device tensors only; A, C and D row-major.
  // A block-scaled plan takes RunOptions::scale_a [total_m, KB] row-major (a group's scales are the rows of its own
  // tokens, as a per-token quantizer writes them) and scale_b [G, NB, KB] row-major, KB = ceil(k / 128) and
  // NB = ceil(n / 128); f32 device tensors.
  void run_contiguous(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                      const TensorView& offsets, double alpha = 1.0, double beta = 0.0, const RunOptions& options = {});

  // The kernel run() would use for these lists (the same checks; nothing runs; no GPU needed).
  KernelSpec spec_for(std::span<const TensorView> A, std::span<const TensorView> B, std::span<const TensorView> C,
                      std::span<const TensorView> D, double beta = 0.0);
  // The kernel run_contiguous() runs for these tensors (the same checks but where they live and the block scales;
  // nothing runs; no GPU needed). Where it is a 256 x 128 tile over an N that 256 does not divide and the experts
  // average fewer than 1024 rows, run_contiguous launches the 128 x 256 one beside it and the GPU runs whichever needs
  // fewer waves on the group sizes.
  KernelSpec spec_for_contiguous(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                                 const TensorView& offsets, double beta = 0.0);
  // The kernel launched beside spec_for_contiguous's where the GPU picks between the two (above), else none.
  std::optional<KernelSpec> rival_for_contiguous(const TensorView& A, const TensorView& B, const TensorView* C,
                                                 const TensorView& D, const TensorView& offsets, double beta = 0.0);
  // The plan's kernel and the others run_contiguous() picks for some shapes (SM90 16-bit plans that set no tile: 128 x
  // 256 tiles where N is a multiple of 256, 256 x 128 for other N over experts of 256 rows or more), for the widest
  // alignments: what a pack ships for the plan.
  std::vector<KernelSpec> run_time_kernels() const;

 private:
  struct Groups;
  struct Contiguous;
  Contiguous check_contiguous(const TensorView& A, const TensorView& B, const TensorView* C, const TensorView& D,
                              const TensorView& offsets, double beta) const;
  Groups check_groups(std::span<const TensorView> A, std::span<const TensorView> B, std::span<const TensorView> C,
                      std::span<const TensorView> D, double beta);
  selection::KernelChoices& choices_for_alignments(int alignment_a, int alignment_b, int alignment_c);
  KernelModule& module_for_alignments(int alignment_a, int alignment_b, int alignment_c);
  KernelSpec spec_for_alignments(int alignment_a, int alignment_b, int alignment_c);
  // The index (into the plan's C alignments) of the widest vector both D and C (when given) fit.
  std::size_t output_alignment_index(const detail::MatrixOperand& d, const detail::MatrixOperand* c,
                                     const std::string& d_name, const std::string& c_name) const;
  // What to try when a tensor fits no vector of the plan's kernels.
  const char* alignment_hint() const;

  std::unique_ptr<runtime::PinnedMetadata> metadata_;
};

}  // namespace gemmkit
