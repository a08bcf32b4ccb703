// src/catalog/catalog.hpp: which kernel configurations exist per architecture, the default choice, and the
// rules a configuration must satisfy. Pure data and functions: no I/O, no CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gemmkit/kernel_spec.hpp"
#include "gemmkit/types.hpp"

namespace gemmkit::catalog {

struct OperandTypes {
  DataType a, b, c, d, accumulator;
  Layout layout_a, layout_b, layout_c;
};

// What a GPU of a compute capability allows; from the device when there is one, else from this table.
struct DeviceLimits {
  int cc = 0;
  int sm_count = 0;
  int max_smem_per_block = 0;  // bytes, the opt-in maximum
};
DeviceLimits limits_for_cc(int cc);

// The kernel generation used for a plan: 90 (CUTLASS 3.x) for SM90 tensor-op kernels other than f64, else 80.
int kernel_cc_for(int cc, OpClass opclass, const OperandTypes& types);
KernelFamily family_for(int kernel_cc);

// True when the kernel must compute the transposed problem D^T = B^T A^T: SM90 tf32 wgmma cannot read a
// K-major A together with an N-major B (CUTLASS would swap them internally and need a transposed epilogue).
bool computes_transposed(int cc, OpClass opclass, const OperandTypes& types);

// Opclasses with kernels for these types/layouts on cc, TensorOp first. Empty: no kernel at all.
std::vector<OpClass> supported_opclasses(int cc, const OperandTypes& types);

// Vector widths (elements) the family accepts for an operand, widest first.
std::vector<int> operand_alignments(int cc, OpClass opclass, DataType element, const OperandTypes& types);

// Every valid configuration, the default first; no duplicates. Alignments 0 mean the widest; narrower A/B
// alignments on SM90 give the cp.async configurations (TMA needs 16-byte aligned rows).
std::vector<TileDescription> tile_descriptions(int cc, OpClass opclass, const OperandTypes& types,
                                               const DeviceLimits& limits, int alignment_a = 0,
                                               int alignment_b = 0);
TileDescription default_tile_description(int cc, OpClass opclass, const OperandTypes& types,
                                         const DeviceLimits& limits);

// A GEMM's extent as the kernel sees it.
struct ProblemShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
};

// The configuration (index into `tiles`, all valid for `spec`) to run this problem with when the plan has none:
// the default (index 0) for problems under 4 GFLOP and for problems that fill the GPU; for the others, the tile that minimises an estimated
// time (waves x tile area / tile efficiency); for few tiles and a long K, the Stream-K configuration.
std::size_t choose_tile(const std::vector<TileDescription>& tiles, const KernelSpec& spec, const ProblemShape& shape,
                        int sm_count);

// Mainloop shared memory of one pipeline stage, in bytes (the reference's estimate).
int smem_bytes_per_stage(const TileDescription& tile, DataType a, DataType b);

// Checks every rule a spec must satisfy before nvcc runs; throws ConfigError naming the rule and the numbers.
void validate(const KernelSpec& spec, const DeviceLimits& limits);

}  // namespace gemmkit::catalog
