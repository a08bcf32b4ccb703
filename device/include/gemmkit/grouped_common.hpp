// device/include/gemmkit/grouped_common.hpp: what both grouped families share: the metadata layout, per-group
// checks, the list-form packer, the contiguous-form derivation kernel and the launch cache.
// A family glue header (sm80_grouped.hpp, sm90_grouped.hpp) supplies a Traits type: the compiled operands (an
// Operands<...>) plus the CUTLASS types of one group's entries in the metadata arrays:
//   Shape, static Shape shape(int m, int n, int k)  (host and device)
//   PtrA, PtrB, PtrC, PtrD                           (what a pointer-array entry is)
//   StrideA..StrideD, static StrideX stride_x(int64_t ld)  (host only)
//   kAlignedExtents  (whether row / column lengths must be multiples of the alignment too)
//   kBlockScaled     (whether the mainloop reads A's and B's f32 block scales: abi.h's scale_a / scale_b)
//   static int32_t band_rows(int32_t n, int32_t sm_count)  (host; the contiguous form's bands, 0 for none)
//   kTileM, kTileN   (the CTA tile: the contiguous form's transposed-rival choice counts tiles with it)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>

#include "cutlass/bfloat16.h"
#include "cutlass/cutlass.h"
#include "cutlass/float8.h"
#include "cutlass/half.h"
#include "cutlass/layout/matrix.h"
#include "cutlass/numeric_size.h"
#include "cutlass/tfloat32.h"
#include "gemmkit/abi.h"
#include "gemmkit/module_common.hpp"

namespace gemmkit::grouped {

// The caller's arguments are compared byte for byte by the launch cache.
static_assert(sizeof(gk_grouped_args) == 6 * 4 + 4 * 8, "gk_grouped_args has padding");
static_assert(sizeof(gk_grouped_problem) == 4 * 4 + 4 * 8 + 4 * 8 + 2 * 8, "gk_grouped_problem has padding");
static_assert(sizeof(gk_grouped_contiguous) == 4 * 4 + 5 * 8 + 5 * 8 + 2 * 8, "gk_grouped_contiguous has padding");

// Block scales: one f32 per 128 deep K block (and per 128 columns of B).
constexpr int kScaleBlock = 128;
inline int64_t scale_blocks(int64_t extent) {
  return (extent + kScaleBlock - 1) / kScaleBlock;
}
using ScalePtr = const float*;

// One operand as compiled: element type, layout and alignment (in elements).
template <class Element_, class Layout_, int Alignment_>
struct Operand {
  using Element = Element_;
  using Layout = Layout_;
  static constexpr int kAlignment = Alignment_;
};

// The operands a grouped module is compiled for; D has C's layout.
template <class ElementA_, class LayoutA_, int AlignmentA_, class ElementB_, class LayoutB_, int AlignmentB_,
          class ElementC_, class LayoutC_, int AlignmentC_, class ElementD_, int AlignmentD_>
struct Operands {
  using A = Operand<ElementA_, LayoutA_, AlignmentA_>;
  using B = Operand<ElementB_, LayoutB_, AlignmentB_>;
  using C = Operand<ElementC_, LayoutC_, AlignmentC_>;
  using D = Operand<ElementD_, LayoutC_, AlignmentD_>;
  using ElementA = ElementA_;
  using ElementB = ElementB_;
  using ElementC = ElementC_;
  using ElementD = ElementD_;
};

template <class Layout>
constexpr bool kRowMajor = std::is_same_v<Layout, cutlass::layout::RowMajor>;

// The contiguous (MoE) form stacks groups along the rows of A and D, which only row-major A and D keep aligned
// without reading the group sizes.
template <class Traits>
constexpr bool kContiguous = std::conjunction_v<std::bool_constant<kRowMajor<typename Traits::A::Layout>>,
                                                std::bool_constant<kRowMajor<typename Traits::D::Layout>>>;

// ---- Metadata layout --------------------------------------------------------------------------------------------

// Each array starts on a 16-byte boundary (CuTe strides and pointers are read as 8-byte words; 16 keeps the layout
// the same whatever the family stores).
constexpr std::size_t kArrayAlignment = 16;

// Typed views of the eleven metadata arrays of `groups` groups at `base`: problem shapes, the A/B/C/D pointer
// arrays, the A/B/C/D stride arrays, then A's and B's block-scale pointers (null for kernels without block scales).
// The blob holds no pointer into itself, so it is position independent: packed on the host, copied anywhere on the
// device.
template <class Traits>
struct Metadata {
  typename Traits::Shape* shapes;
  typename Traits::PtrA* A;
  typename Traits::PtrB* B;
  typename Traits::PtrC* C;
  typename Traits::PtrD* D;
  typename Traits::StrideA* dA;
  typename Traits::StrideB* dB;
  typename Traits::StrideC* dC;
  typename Traits::StrideD* dD;
  ScalePtr* SFA;
  ScalePtr* SFB;
  std::size_t bytes;  // of the whole blob

  static Metadata at(const void* base, int32_t groups) {
    Metadata out{};
    const auto start = reinterpret_cast<std::uintptr_t>(base);
    std::size_t offset = 0;
    auto carve = [&](auto*& array) {
      using T = std::remove_reference_t<decltype(*array)>;
      array = reinterpret_cast<T*>(start + offset);
      const std::size_t size = sizeof(T) * static_cast<std::size_t>(groups);
      offset += (size + kArrayAlignment - 1) / kArrayAlignment * kArrayAlignment;
    };
    carve(out.shapes);
    carve(out.A);
    carve(out.B);
    carve(out.C);
    carve(out.D);
    carve(out.dA);
    carve(out.dB);
    carve(out.dC);
    carve(out.dD);
    carve(out.SFA);
    carve(out.SFB);
    out.bytes = offset;
    return out;
  }

  static std::size_t size(int32_t groups) { return at(nullptr, groups).bytes; }
};

inline bool aligned(const void* pointer, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

// ---- Checks -----------------------------------------------------------------------------------------------------

// Call-wide arguments: GK_OK or GK_ERR_ARGS.
inline int check_args(const gk_grouped_args* args) {
  if (args == nullptr || args->groups < 1) return GK_ERR_ARGS;
  return GK_OK;
}

// One rows x cols operand: GK_ERR_ARGS for a null pointer or a leading dimension shorter than a row (row-major) or
// column (column-major), GK_ERR_CANNOT_IMPLEMENT for a pointer or leading dimension that is not a multiple of the
// alignment (TMA and the vectorized 2.x iterators need it), or, when the family's kAlignedExtents says so, a row
// (column) length that is not one either: a 2.x iterator reads a whole vector whenever its first element is inside
// the matrix, where TMA clips at any extent.
template <class Traits, class Operand>
int check_operand(const void* pointer, int64_t ld, int64_t rows, int64_t cols) {
  constexpr int alignment = Operand::kAlignment;
  const int64_t extent = kRowMajor<typename Operand::Layout> ? cols : rows;
  if (pointer == nullptr) return GK_ERR_ARGS;
  if (ld < std::max<int64_t>(1, extent)) return GK_ERR_ARGS;
  constexpr std::size_t bytes =
      std::max<std::size_t>(1, cutlass::sizeof_bits<typename Operand::Element>::value * alignment / 8);
  if (ld % alignment != 0 || !aligned(pointer, bytes)) return GK_ERR_CANNOT_IMPLEMENT;
  if (Traits::kAlignedExtents && extent % alignment != 0) return GK_ERR_CANNOT_IMPLEMENT;
  return GK_OK;
}

// A block-scaled kernel's scales: GK_ERR_ARGS when one is missing, GK_ERR_CANNOT_IMPLEMENT when one is not f32
// aligned. Kernels without block scales ignore them.
template <class Traits>
int check_scales(const float* scale_a, const float* scale_b) {
  if (!Traits::kBlockScaled) return GK_OK;
  if (scale_a == nullptr || scale_b == nullptr) return GK_ERR_ARGS;
  return aligned(scale_a, sizeof(float)) && aligned(scale_b, sizeof(float)) ? GK_OK : GK_ERR_CANNOT_IMPLEMENT;
}

// C: absent (D is named in its place and never read, since beta is 0) or checked like the other operands.
template <class Traits>
int check_source(const void* pointer, int64_t ld, int64_t rows, int64_t cols, double beta) {
  if (pointer == nullptr) return beta == 0.0 ? GK_OK : GK_ERR_ARGS;
  return check_operand<Traits, typename Traits::C>(pointer, ld, rows, cols);
}

inline bool is_empty(const gk_grouped_problem& p) {
  return p.m == 0 || p.n == 0 || p.k == 0;
}

// One group of the list form (the first failure is reported); an empty group's pointers are never read.
template <class Traits>
int check_problem(const gk_grouped_problem& p, double beta) {
  if (p.m < 0 || p.n < 0 || p.k < 0) return GK_ERR_ARGS;
  if (is_empty(p)) return GK_OK;
  if (int status = check_operand<Traits, typename Traits::A>(p.A, p.lda, p.m, p.k); status != GK_OK) return status;
  if (int status = check_operand<Traits, typename Traits::B>(p.B, p.ldb, p.k, p.n); status != GK_OK) return status;
  if (int status = check_operand<Traits, typename Traits::D>(p.D, p.ldd, p.m, p.n); status != GK_OK) return status;
  if (int status = check_scales<Traits>(p.scale_a, p.scale_b); status != GK_OK) return status;
  return check_source<Traits>(p.C, p.ldc, p.m, p.n, beta);
}

// Whether a contiguous problem has no work at all (then nothing is launched and D is not written).
inline bool is_empty(const gk_grouped_contiguous& c) {
  return c.total_m == 0 || c.n == 0 || c.k == 0;
}

// The contiguous form: every group's A, C and D start row_start * ld elements after the base, and its B g *
// batch_stride_b, so checking the bases, the leading dimensions and the batch stride covers every group.
template <class Traits>
int check_contiguous(const gk_grouped_args& args, const gk_grouped_contiguous* c) {
  if (c == nullptr || c->total_m < 0 || c->n < 0 || c->k < 0 || c->batch_stride_b < 0) return GK_ERR_ARGS;
  if (c->transposed_rival < 0 || c->transposed_rival > 2) return GK_ERR_ARGS;
  if (!kContiguous<Traits>) return GK_ERR_CANNOT_IMPLEMENT;
  if (is_empty(*c)) return GK_OK;
  if (c->offsets == nullptr) return GK_ERR_ARGS;
  if (c->batch_stride_b % Traits::B::kAlignment != 0) return GK_ERR_CANNOT_IMPLEMENT;
  const int64_t m = c->total_m;
  if (int status = check_operand<Traits, typename Traits::A>(c->A, c->lda, m, c->k); status != GK_OK) return status;
  if (int status = check_operand<Traits, typename Traits::B>(c->B, c->ldb, c->k, c->n); status != GK_OK) return status;
  if (int status = check_operand<Traits, typename Traits::D>(c->D, c->ldd, m, c->n); status != GK_OK) return status;
  if (int status = check_scales<Traits>(c->scale_a, c->scale_b); status != GK_OK) return status;
  return check_source<Traits>(c->C, c->ldc, m, c->n, args.beta);
}

// Checks that a metadata buffer can hold `groups` groups.
template <class Traits>
int check_buffer(const void* metadata, std::size_t bytes, int32_t groups) {
  if (metadata == nullptr || !aligned(metadata, kArrayAlignment)) return GK_ERR_ARGS;
  return bytes < Metadata<Traits>::size(groups) ? GK_ERR_WORKSPACE : GK_OK;
}

// ---- List form: packing -----------------------------------------------------------------------------------------

template <class Ptr>
Ptr as_pointer(const void* pointer) {
  return static_cast<Ptr>(const_cast<void*>(pointer));
}

// Writes the metadata of args.groups problems into `host` (see Metadata); checks every group first, so that a
// failure leaves a consistent old blob behind.
template <class Traits>
int pack(const gk_grouped_args& args, const gk_grouped_problem* problems, void* host, std::size_t bytes,
         int32_t* failed_group) {
  if (problems == nullptr) return GK_ERR_ARGS;
  if (int status = check_buffer<Traits>(host, bytes, args.groups); status != GK_OK) return status;
  for (int32_t g = 0; g < args.groups; ++g) {
    if (int status = check_problem<Traits>(problems[g], args.beta); status != GK_OK) {
      if (failed_group != nullptr) *failed_group = g;
      return status;
    }
  }
  const Metadata<Traits> out = Metadata<Traits>::at(host, args.groups);
  for (int32_t g = 0; g < args.groups; ++g) {
    const gk_grouped_problem& p = problems[g];
    // An empty group becomes 0 x 0 x 0: no tile at all, where k == 0 alone would still write beta * C to D.
    const bool empty = is_empty(p);
    out.shapes[g] = Traits::shape(empty ? 0 : p.m, empty ? 0 : p.n, empty ? 0 : p.k);
    out.A[g] = as_pointer<typename Traits::PtrA>(p.A);
    out.B[g] = as_pointer<typename Traits::PtrB>(p.B);
    out.C[g] = as_pointer<typename Traits::PtrC>(p.C != nullptr ? p.C : p.D);
    out.D[g] = as_pointer<typename Traits::PtrD>(p.D);
    out.dA[g] = Traits::stride_a(p.lda);
    out.dB[g] = Traits::stride_b(p.ldb);
    out.dC[g] = Traits::stride_c(p.C != nullptr ? p.ldc : p.ldd);
    out.dD[g] = Traits::stride_d(p.ldd);
    out.SFA[g] = Traits::kBlockScaled ? p.scale_a : nullptr;
    out.SFB[g] = Traits::kBlockScaled ? p.scale_b : nullptr;
  }
  return GK_OK;
}

// ---- Contiguous form: deriving the metadata on the GPU ----------------------------------------------------------

// A persistent grouped scheduler walks each group's tiles down M, one column of tiles after another, so the tiles in
// flight at once span all of a tall group's rows and one or two of its columns: its A then streams through L2 once
// per column. The contiguous form cuts such an expert into bands (metadata entries of their own, sharing the
// expert's B) just tall enough that one wave of tiles spans at least kMinBandTiles rows of tiles and, where N is
// narrow, every column; a band's A rows then stay in L2 while its B columns pass. Results do not change: every tile
// is the same tile. Measured: python/bench/moe_bands.py.
// With CTA tiles of at least 64 rows a band has at least 512 rows, which the host's metadata size counts on
// (src/runtime/grouped_launch.cpp); a smaller buffer makes contiguous_plan keep one entry per group.
constexpr int64_t kMinBandTiles = 8;

// The SMs of `device` (the current device when negative), 0 when CUDA cannot tell.
inline int multiprocessors(int device) {
  int count = 0;
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) return 0;
  return cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess ? count : 0;
}

inline int32_t band_rows_for(int64_t tile_m, int64_t tile_n, int64_t cluster_m, int64_t n, int64_t sm_count) {
  if (n <= 0 || sm_count <= 0) return 0;
  const int64_t columns = (n + tile_n - 1) / tile_n;
  int64_t rows_of_tiles = std::max(kMinBandTiles, (sm_count + columns - 1) / columns);
  rows_of_tiles = (rows_of_tiles + cluster_m - 1) / cluster_m * cluster_m;
  return static_cast<int32_t>(std::min<int64_t>(rows_of_tiles * tile_m, INT32_MAX / 2));
}

// Metadata entries of a contiguous problem cut into bands of `band_rows` (0: one per group): an expert of m rows
// takes ceil(m / band_rows) entries, at most groups + ceil(total_m / band_rows) in all.
inline int32_t contiguous_entries(int32_t groups, int32_t total_m, int32_t band_rows) {
  return band_rows > 0 ? groups + (total_m + band_rows - 1) / band_rows : groups;
}

// Everything the derivation kernel needs, by value: the shared strides are built on the host once per call.
template <class Traits>
struct ContiguousPlan {
  Metadata<Traits> out;  // device views, `entries` long
  int32_t groups, total_m, n, k;
  int32_t band_rows;  // 0: one entry per group
  int32_t entries;
  int32_t transposed_rival;  // gk_grouped_contiguous's: 0, or which of the pair this module is
  int32_t tile_m, tile_n;    // this module's CTA tile, for the waves the rivals compare
  int32_t sm_count;
  const int32_t* offsets;
  const typename Traits::ElementA* A;
  const typename Traits::ElementB* B;
  const typename Traits::ElementC* C;  // D when the call has no C
  typename Traits::ElementD* D;
  int64_t lda, ldc, ldd, batch_stride_b;
  ScalePtr scale_a;  // null unless Traits::kBlockScaled
  ScalePtr scale_b;
  int64_t k_blocks, n_blocks;
  typename Traits::StrideA dA;
  typename Traits::StrideB dB;
  typename Traits::StrideC dC;
  typename Traits::StrideD dD;
};

// Group g's rows [start, end) from the offsets, clamped into [0, total_m], so that no offsets can make the GEMM
// touch memory outside A, C or D.
template <class Traits>
__device__ int2 group_rows(const ContiguousPlan<Traits>& plan, int32_t g) {
  const int32_t start = g == 0 ? 0 : min(max(plan.offsets[g - 1], 0), plan.total_m);
  return make_int2(start, min(max(plan.offsets[g], start), plan.total_m));
}

// Metadata entry `entry`: rows [start, start + m) of group g, its pointers and the shared strides.
template <class Traits>
__device__ void derive_entry(const ContiguousPlan<Traits>& plan, int32_t entry, int32_t g, int32_t start, int32_t m) {
  plan.out.shapes[entry] = Traits::shape(m, m > 0 ? plan.n : 0, m > 0 ? plan.k : 0);
  // The pointer arrays hold const or non-const pointers, as the family's CUTLASS arguments want them.
  plan.out.A[entry] = const_cast<typename Traits::PtrA>(plan.A + start * plan.lda);
  plan.out.B[entry] = const_cast<typename Traits::PtrB>(plan.B + g * plan.batch_stride_b);
  plan.out.C[entry] = const_cast<typename Traits::PtrC>(plan.C + start * plan.ldc);
  plan.out.D[entry] = plan.D + start * plan.ldd;
  plan.out.dA[entry] = plan.dA;
  plan.out.dB[entry] = plan.dB;
  plan.out.dC[entry] = plan.dC;
  plan.out.dD[entry] = plan.dD;
  // A's scales are row-major, so a group's are the rows of its own tokens; B's are one block per group.
  plan.out.SFA[entry] = plan.scale_a == nullptr ? nullptr : plan.scale_a + start * plan.k_blocks;
  plan.out.SFB[entry] = plan.scale_b == nullptr ? nullptr : plan.scale_b + g * plan.n_blocks * plan.k_blocks;
}

constexpr int kDeriveThreads = 128;
// One block numbers every band: a scan over the groups, a block at a time. At most 256 threads, so that any register
// count the derivation compiles to fits one block (both kernels are bounded to it).
constexpr int kBandThreads = 256;
constexpr int kDeriveMaxThreads = kBandThreads;

// The bands' entries, in group order, then empty entries up to plan.entries. One block of kBandThreads threads.
template <class Traits>
__device__ void derive_bands(const ContiguousPlan<Traits>& plan) {
  __shared__ int32_t warp_sums[kBandThreads / 32];
  __shared__ int32_t first_of_chunk;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) first_of_chunk = 0;
  __syncthreads();
  for (int32_t chunk = 0; chunk < plan.groups; chunk += kBandThreads) {
    const int32_t g = chunk + static_cast<int32_t>(threadIdx.x);
    const int2 rows = g < plan.groups ? group_rows(plan, g) : make_int2(0, 0);
    const int32_t bands = (rows.y - rows.x + plan.band_rows - 1) / plan.band_rows;
    int32_t inclusive = bands;  // a scan of the band counts: within each warp, then over the warps' sums
    for (int step = 1; step < 32; step *= 2) {
      const int32_t before = __shfl_up_sync(0xffffffffu, inclusive, step);
      if (lane >= step) inclusive += before;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
      int32_t sum = lane < kBandThreads / 32 ? warp_sums[lane] : 0;
      for (int step = 1; step < 32; step *= 2) {
        const int32_t before = __shfl_up_sync(0xffffffffu, sum, step);
        if (lane >= step) sum += before;
      }
      if (lane < kBandThreads / 32) warp_sums[lane] = sum;
    }
    __syncthreads();
    const int32_t first = first_of_chunk + (warp > 0 ? warp_sums[warp - 1] : 0) + inclusive - bands;
    for (int32_t b = 0; b < bands; ++b) {
      const int32_t start = rows.x + b * plan.band_rows;
      derive_entry(plan, first + b, g, start, min(plan.band_rows, rows.y - start));
    }
    __syncthreads();  // everyone has read first_of_chunk and warp_sums
    if (threadIdx.x == kBandThreads - 1) first_of_chunk = first + bands;
    __syncthreads();
  }
  for (int32_t entry = first_of_chunk + static_cast<int32_t>(threadIdx.x); entry < plan.entries;
       entry += kBandThreads) {
    derive_entry(plan, entry, 0, 0, 0);
  }
}

// Whether this module is the one of a transposed-tile pair to run (abi.h, gk_grouped_contiguous::transposed_rival):
// every block counts both tiles' waves over all groups, so every block of both derivations agrees.
template <class Traits>
__device__ bool runs_against_rival(const ContiguousPlan<Traits>& plan) {
  __shared__ int64_t warp_tiles[2][kDeriveMaxThreads / 32];
  __shared__ bool runs;
  const int64_t own_columns = (plan.n + plan.tile_n - 1) / plan.tile_n;
  const int64_t rival_columns = (plan.n + plan.tile_m - 1) / plan.tile_m;  // the rival's tile is tile_n x tile_m
  int64_t own = 0, rival = 0;
  for (int32_t g = static_cast<int32_t>(threadIdx.x); g < plan.groups; g += static_cast<int32_t>(blockDim.x)) {
    const int2 rows = group_rows(plan, g);
    own += (rows.y - rows.x + plan.tile_m - 1) / plan.tile_m * own_columns;
    rival += (rows.y - rows.x + plan.tile_n - 1) / plan.tile_n * rival_columns;
  }
  for (int step = 16; step > 0; step /= 2) {
    own += __shfl_down_sync(0xffffffffu, own, step);
    rival += __shfl_down_sync(0xffffffffu, rival, step);
  }
  const int warps = static_cast<int>((blockDim.x + 31) / 32);
  if (threadIdx.x % 32 == 0) {
    warp_tiles[0][threadIdx.x / 32] = own;
    warp_tiles[1][threadIdx.x / 32] = rival;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w) {
      own += warp_tiles[0][w];
      rival += warp_tiles[1][w];
    }
    const int64_t sms = plan.sm_count > 0 ? plan.sm_count : 1;
    const int64_t own_waves = (own + sms - 1) / sms, rival_waves = (rival + sms - 1) / sms;
    runs = plan.transposed_rival == 1 ? own_waves <= rival_waves : own_waves < rival_waves;
  }
  __syncthreads();
  return runs;
}

template <class Traits>
__device__ void derive_contiguous_metadata(const ContiguousPlan<Traits>& plan) {
  if (plan.transposed_rival != 0 && !runs_against_rival(plan)) {
    // Every entry empty: the GEMM launch that follows finds no tiles.
    const int32_t first = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
    for (int32_t entry = first; entry < plan.entries; entry += static_cast<int32_t>(gridDim.x * blockDim.x)) {
      derive_entry(plan, entry, 0, 0, 0);
    }
    return;
  }
  if (plan.band_rows > 0) {
    derive_bands(plan);
    return;
  }
  const int32_t g = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);  // one thread per group
  if (g >= plan.groups) return;
  const int2 rows = group_rows(plan, g);
  derive_entry(plan, g, g, rows.x, rows.y - rows.x);
}

template <class Traits>
__global__ void __launch_bounds__(kDeriveMaxThreads) derive_contiguous(ContiguousPlan<Traits> plan) {
  derive_contiguous_metadata(plan);
}

// The derivation's launch: one block for bands, else a thread per group.
template <class Traits>
std::pair<dim3, dim3> derive_launch(const ContiguousPlan<Traits>& plan) {
  if (plan.band_rows > 0) return {dim3(1), dim3(kBandThreads)};
  return {dim3(static_cast<unsigned>((plan.groups + kDeriveThreads - 1) / kDeriveThreads)), dim3(kDeriveThreads)};
}

// What the derivation of a checked, non-empty contiguous problem's metadata into `metadata` (`bytes` long) takes:
// bands where the family cuts experts into bands and the buffer holds them, else one entry per group.
template <class Traits>
ContiguousPlan<Traits> contiguous_plan(const gk_grouped_args& args, const gk_grouped_contiguous& c, void* metadata,
                                       std::size_t bytes) {
  using ElementC = typename Traits::ElementC;
  const bool has_c = c.C != nullptr;
  ContiguousPlan<Traits> plan{};
  plan.sm_count = args.sm_count > 0 ? args.sm_count : multiprocessors(args.device_id);
  plan.band_rows = Traits::band_rows(c.n, plan.sm_count);
  plan.entries = contiguous_entries(args.groups, c.total_m, plan.band_rows);
  if (plan.band_rows > 0 && bytes < Metadata<Traits>::size(plan.entries)) {
    plan.band_rows = 0;
    plan.entries = args.groups;
  }
  plan.out = Metadata<Traits>::at(metadata, plan.entries);
  plan.transposed_rival = c.transposed_rival;
  plan.tile_m = Traits::kTileM;
  plan.tile_n = Traits::kTileN;
  plan.groups = args.groups;
  plan.total_m = c.total_m;
  plan.n = c.n;
  plan.k = c.k;
  plan.offsets = c.offsets;
  plan.A = static_cast<const typename Traits::ElementA*>(c.A);
  plan.B = static_cast<const typename Traits::ElementB*>(c.B);
  plan.C = static_cast<const ElementC*>(has_c ? c.C : static_cast<const void*>(c.D));
  plan.D = static_cast<typename Traits::ElementD*>(c.D);
  plan.lda = c.lda;
  plan.ldc = has_c ? c.ldc : c.ldd;
  plan.ldd = c.ldd;
  plan.batch_stride_b = c.batch_stride_b;
  plan.scale_a = Traits::kBlockScaled ? c.scale_a : nullptr;
  plan.scale_b = Traits::kBlockScaled ? c.scale_b : nullptr;
  plan.k_blocks = scale_blocks(c.k);
  plan.n_blocks = scale_blocks(c.n);
  plan.dA = Traits::stride_a(c.lda);
  plan.dB = Traits::stride_b(c.ldb);
  plan.dC = Traits::stride_c(plan.ldc);
  plan.dD = Traits::stride_d(c.ldd);
  return plan;
}

// Enqueues the derivation (the split path's host module launches the cubin's gk_derive_contiguous instead).
template <class Traits>
int launch_derive_contiguous(const ContiguousPlan<Traits>& plan, cudaStream_t stream) {
  const auto [grid, block] = derive_launch(plan);
  derive_contiguous<Traits><<<grid, block, 0, stream>>>(plan);
  return module::record_cuda_error(cudaGetLastError()) ? GK_ERR_LAUNCH : GK_OK;
}

// ---- Launch cache -----------------------------------------------------------------------------------------------

// What a prepared launch depends on. The metadata's contents do not matter: the kernels read them on the GPU.
struct LaunchKey {
  gk_grouped_args args;
  const void* metadata;
  void* workspace;
  int device;

  bool operator==(const LaunchKey& other) const {
    return std::memcmp(&args, &other.args, sizeof(args)) == 0 && metadata == other.metadata &&
           workspace == other.workspace && device == other.device;
  }
};

// This thread's last prepared launch (CUTLASS Params or operator); a hit skips CUTLASS's host-side preparation
// (TMA descriptors, occupancy queries), so a launch costs one kernel launch.
template <class Prepared>
struct LaunchCache {
  bool valid = false;
  LaunchKey key{};
  Prepared prepared{};

  bool hit(const LaunchKey& next) const { return valid && key == next; }
  void store(const LaunchKey& next) {
    key = next;
    valid = true;
  }
};

// Launches through `cache`: on a miss, `prepare(prepared, device)` (a gk_status) first builds the prepared state
// for this key; then `launch(prepared)` (a gk_status) enqueues the kernel.
template <class Prepared, class Prepare, class Launch>
int cached_launch(LaunchCache<Prepared>& cache, const gk_grouped_args& args, const void* metadata, void* workspace,
                  Prepare&& prepare, Launch&& launch) {
  const int device = module::current_device();
  if (device < 0) return GK_ERR_LAUNCH;
  const LaunchKey key{args, metadata, workspace, device};
  if (!cache.hit(key)) {
    cache.valid = false;
    if (int status = prepare(cache.prepared, device); status != GK_OK) return status;
    cache.store(key);
  }
  return launch(cache.prepared);
}

// CUTLASS's own checks of prepared arguments: GK_OK, GK_ERR_CANNOT_IMPLEMENT or GK_ERR_WORKSPACE.
template <class Gemm>
int check_cutlass_arguments(const typename Gemm::Arguments& arguments, const void* workspace) {
  if (Gemm::can_implement(arguments) != cutlass::Status::kSuccess) return GK_ERR_CANNOT_IMPLEMENT;
  if (Gemm::get_workspace_size(arguments) > 0 && workspace == nullptr) return GK_ERR_WORKSPACE;
  return GK_OK;
}

// ---- Description ------------------------------------------------------------------------------------------------

template <class Element>
constexpr int32_t dtype_of() {
  if constexpr (std::is_same_v<Element, cutlass::half_t>) return GK_DTYPE_F16;
  if constexpr (std::is_same_v<Element, cutlass::bfloat16_t>) return GK_DTYPE_BF16;
  if constexpr (std::is_same_v<Element, float>) return GK_DTYPE_F32;
  if constexpr (std::is_same_v<Element, cutlass::tfloat32_t>) return GK_DTYPE_TF32;
  if constexpr (std::is_same_v<Element, double>) return GK_DTYPE_F64;
  if constexpr (std::is_same_v<Element, int8_t>) return GK_DTYPE_S8;
  if constexpr (std::is_same_v<Element, uint8_t>) return GK_DTYPE_U8;
  if constexpr (std::is_same_v<Element, int32_t>) return GK_DTYPE_S32;
  if constexpr (std::is_same_v<Element, cutlass::float_e4m3_t>) return GK_DTYPE_E4M3;
  if constexpr (std::is_same_v<Element, cutlass::float_e5m2_t>) return GK_DTYPE_E5M2;
  return 0;
}

template <class Layout>
constexpr int32_t layout_of() {
  return kRowMajor<Layout> ? GK_ROW_MAJOR : GK_COLUMN_MAJOR;
}

template <class Traits>
constexpr gk_grouped_info describe(const char* activation) {
  using A = typename Traits::A;
  using B = typename Traits::B;
  using C = typename Traits::C;
  using D = typename Traits::D;
  return gk_grouped_info{dtype_of<typename A::Element>(),
                         dtype_of<typename B::Element>(),
                         dtype_of<typename C::Element>(),
                         dtype_of<typename D::Element>(),
                         layout_of<typename A::Layout>(),
                         layout_of<typename B::Layout>(),
                         layout_of<typename C::Layout>(),
                         A::kAlignment,
                         B::kAlignment,
                         C::kAlignment,
                         D::kAlignment,
                         kContiguous<Traits> ? 1 : 0,
                         Traits::kAlignedExtents ? 1 : 0,
                         Traits::kBlockScaled ? 1 : 0,
                         activation};
}

}  // namespace gemmkit::grouped
