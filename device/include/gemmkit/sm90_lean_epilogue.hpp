// device/include/gemmkit/sm90_lean_epilogue.hpp: gemmkit's lean epilogue for CUTLASS 3.x SM90 GEMMs: D =
// act(alpha * (acc * row_scale * column_scale) + bias + beta * C), with the activation, the bias (none, per row, per
// column) and the scale vectors chosen at launch, so that one kernel serves every plain epilogue. It runs in the
// consumer warps on the accumulator registers, with no pipeline and no producer warp. CUTLASS's TMA epilogue spends
// more than half of a kernel's front-end compile time in its store; this one instantiates a few unrolled loops. D
// leaves in 16-byte row vectors: the four threads of a quad, which hold pairs of neighbouring columns, trade their
// pairs through shuffles until each holds eight consecutive columns. With staging rows (GEMMKIT_LEAN_TMA_STORE), a
// 16-bit D leaves through shared memory instead: stmatrix writes 32-column chunks of the accumulator layout, one TMA
// store per chunk takes them out (asynchronously, clipped at the problem's edges), two chunks in flight.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cute/arch/copy_sm90.hpp"
#include "cute/arch/copy_sm90_desc.hpp"
#include "cute/arch/copy_sm90_tma.hpp"
#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/array.h"
#include "cutlass/cuda_host_adapter.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/numeric_conversion.h"
#include "gemmkit/abi.h"
#include "gemmkit/activation_at_launch.hpp"

namespace gemmkit::sm90 {

// What the lean epilogue takes at launch (EpilogueArguments::thread).
struct LeanEpilogueParams {
  float alpha = 1.0f, beta = 0.0f;
  int32_t activation = GK_ACTIVATION_IDENTITY;  // gk_activation
  float activation_parameter = 0.0f;            // the leaky_relu slope
  const void* bias = nullptr;                   // ElementBias, per gk_bias_mode
  int32_t bias_mode = GK_BIAS_NONE;
  const float* row_scale = nullptr;  // null: ones
  const float* column_scale = nullptr;
};

namespace lean {

using Pair = cutlass::Array<float, 2>;

// Swaps bit `Bit` of the lane within its quad with bit `Bit` of the item index of four 32-bit items: two such
// stages (Bit 2, then 1) transpose a 4 x 4 block held one row per lane.
template <int Bit>
CUTLASS_DEVICE void quad_exchange(uint32_t (&items)[4], int quad_lane) {
  const bool high = (quad_lane & Bit) != 0;
  CUTLASS_PRAGMA_UNROLL
  for (int low = 0; low < 4; ++low) {
    if (low & Bit) continue;
    const uint32_t sent = high ? items[low] : items[low + Bit];
    const uint32_t received = __shfl_xor_sync(0xffffffffu, sent, Bit);
    if (high) {
      items[low] = received;
    } else {
      items[low + Bit] = received;
    }
  }
}

// Elements `column` and `column + 1` of a vector (a bias, a scale, a row of C) as floats, `outside` for those at or
// past `size` or for a null vector: one load of both where they are inside and the pair is aligned, else one each.
template <class T>
CUTLASS_DEVICE Pair load_pair(T const* vector, int64_t column, int64_t size, float outside) {
  if (vector == nullptr) return Pair{outside, outside};
  T const* at = vector + column;
  using Both = cutlass::AlignedArray<T, 2>;
  if (column + 1 < size && reinterpret_cast<uintptr_t>(at) % alignof(Both) == 0) {
    const Both both = *reinterpret_cast<Both const*>(at);
    return Pair{float(both[0]), float(both[1])};
  }
  return Pair{column < size ? float(at[0]) : outside, column + 1 < size ? float(at[1]) : outside};
}

// A block's eight values through the activation. Not inlined: one copy of every activation's code serves the
// sixteen-odd blocks of a tile, which keeps the kernel's code (and its instruction-cache footprint) small.
struct Block {
  Pair pairs[4];
};
template <bool Approximate>
__noinline__ __device__ Block activate_block(Block block, int32_t activation, float parameter) {
  CUTLASS_PRAGMA_UNROLL
  for (int j = 0; j < 4; ++j)
    block.pairs[j] = gemmkit::activation::apply<Approximate>(block.pairs[j], activation, parameter);
  return block;
}

// A 16-bit D's way out: two buffers of `Rows` x 32 columns (64-byte rows, the span of TMA's 64-byte swizzle), so
// that the threads write one chunk while a TMA store reads the other.
constexpr int kChunkColumns = 32;
template <int Rows>
struct Staging {
  alignas(1024) cute::uint128_t chunks[2][Rows * kChunkColumns * 2 / 16];
};
struct NoStaging {};

// The shared-memory address of 16-byte granule `granule` of row `row` in a chunk at `base`, where TMA's 64-byte
// swizzle puts it: the granule's index XOR bits 7-8 of its address.
CUTLASS_DEVICE uint32_t swizzled_granule(uint32_t base, int row, int granule) {
  const uint32_t at = base + uint32_t(row * 64 + granule * 16);
  return at ^ (((at >> 7) & 3u) << 4);
}

// One stmatrix of four 8 x 8 matrices of 16-bit values, the lane's row address given.
CUTLASS_DEVICE void store_matrices(uint32_t const (&words)[4], uint32_t address) {
#if defined(CUTE_ARCH_STSM_SM90_ENABLED)
  asm volatile("stmatrix.sync.aligned.x4.m8n8.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(words[0]),
               "r"(words[1]), "r"(words[2]), "r"(words[3]));
#endif
}

// A TMA store of the chunk at shared address `chunk` to D's box at (column, row, batch), in the thread's bulk group.
CUTLASS_DEVICE void tma_store(cute::TmaDescriptor const* descriptor, uint32_t chunk, int column, int row, int batch) {
#if defined(CUTE_ARCH_TMA_SM90_ENABLED)
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(descriptor)),
               "r"(chunk), "r"(column), "r"(row), "r"(batch)
               : "memory");
#endif
}

}  // namespace lean

// A CUTLASS operator-style epilogue (DefaultEpilogue's interface), run in SM90 warp-specialized kernels through
// LeanAdapter below. Row-major C and D with 16-byte aligned rows; D of 16 or 32 bits. StagingRows: the rows of the
// kernel's MMA tile (128 cooperative, 64 ping-pong), the height of a 16-bit D's staged chunks; 0 stores every D
// straight from registers.
template <class ElementC_, class StrideC_, class ElementD_, class StrideD_, class ElementBias_, int StagingRows = 0>
class LeanEpilogue {
 public:
  using ElementC = ElementC_;
  using StrideC = StrideC_;
  using ElementD = ElementD_;
  using StrideD = StrideD_;
  using ElementBias = ElementBias_;
  using GmemElementC = std::conditional_t<std::is_void_v<ElementC>, ElementD, ElementC>;
  using ThreadEpilogueOp = LeanEpilogueParams;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;

  static_assert(cute::is_static<cute::remove_cvref_t<decltype(cute::get<1>(StrideD{}))>>::value &&
                    cute::is_static<cute::remove_cvref_t<decltype(cute::get<1>(StrideC{}))>>::value,
                "the lean epilogue moves row-major C and D");
  static_assert(cutlass::sizeof_bits<ElementD>::value == 16 || cutlass::sizeof_bits<ElementD>::value == 32,
                "the lean epilogue stores D of 16 or 32 bits");
  static constexpr bool kApproximate =
      std::is_same_v<ElementD, cutlass::half_t> || std::is_same_v<ElementD, cutlass::bfloat16_t>;
  // 32-bit words of a pair of D's elements.
  static constexpr int kPairWords = 2 * cutlass::sizeof_bits<ElementD>::value / 32;
  // A 16-bit D through shared memory and TMA stores (stmatrix moves 16-bit values only).
  static constexpr bool kStaged = StagingRows > 0 && cutlass::sizeof_bits<ElementD>::value == 16;
  static constexpr int kChunkRows = StagingRows > 0 ? StagingRows : 1;  // a valid array extent either way
  static constexpr int kChunkBytes = kChunkRows * lean::kChunkColumns * 2;

  using SharedStorage = std::conditional_t<kStaged, lean::Staging<kChunkRows>, lean::NoStaging>;
  using TensorStorage = SharedStorage;

  struct Arguments {
    LeanEpilogueParams thread{};
    GmemElementC const* ptr_C = nullptr;
    StrideC dC{};
    ElementD* ptr_D = nullptr;
    StrideD dD{};
  };
  // The arguments and, for the staged stores, D's TMA descriptor (read where the kernel's parameters live).
  struct Params : Arguments {
    cute::TmaDescriptor tma_d{};
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void*) {
    Params params;
    static_cast<Arguments&>(params) = args;
    encode_d(params.tma_d, problem_shape, args);
    return params;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  // D as the staged stores see it: a 16-bit (N, M, L) tensor in boxes of 32 columns x StagingRows rows, 64-byte
  // swizzle. An empty problem runs no tile and needs none. What the driver checks (16-byte address and strides,
  // strides under 2^40 bytes) can_implement has checked.
  template <class ProblemShape>
  static void encode_d(cute::TmaDescriptor& map, ProblemShape const& problem_shape, Arguments const& args) {
    if constexpr (kStaged) {
      const int64_t M = cute::get<0>(problem_shape), N = cute::get<1>(problem_shape), L = cute::get<3>(problem_shape);
      if (M <= 0 || N <= 0 || L <= 0 || args.ptr_D == nullptr) return;
      const int64_t ldd = cute::get<0>(args.dD);
      const int64_t batch = L > 1 ? int64_t(cute::get<2>(args.dD)) : M * ldd;
      cuuint64_t dims[3] = {cuuint64_t(N), cuuint64_t(M), cuuint64_t(L)};
      cuuint64_t strides[2] = {cuuint64_t(ldd) * 2, cuuint64_t(batch) * 2};
      cuuint32_t box[3] = {lean::kChunkColumns, StagingRows, 1};
      cuuint32_t element_strides[3] = {1, 1, 1};
      CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)
      (&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, args.ptr_D, dims, strides, box, element_strides,
       CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    } else {
      (void)map, (void)problem_shape, (void)args;
    }
  }
  // 16-byte rows and addresses of C and D (the vector stores), a bias where one is asked for.
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    constexpr int64_t kC = 16 * 8 / cutlass::sizeof_bits<GmemElementC>::value;
    constexpr int64_t kD = 16 * 8 / cutlass::sizeof_bits<ElementD>::value;
    const bool rows = cute::get<0>(args.dD) % kD == 0 && (args.thread.beta == 0.0f || cute::get<0>(args.dC) % kC == 0);
    const bool batches =
        cute::get<2>(args.dD) % kD == 0 && (args.thread.beta == 0.0f || cute::get<2>(args.dC) % kC == 0);
    const bool addresses = reinterpret_cast<uintptr_t>(args.ptr_D) % 16 == 0 &&
                           (args.thread.beta == 0.0f || reinterpret_cast<uintptr_t>(args.ptr_C) % 16 == 0);
    const bool bias = args.thread.bias_mode == GK_BIAS_NONE || args.thread.bias != nullptr;
    // TMA's limit on a tensor's strides, for the staged stores' descriptor of D
    const bool tma =
        !kStaged || (cute::get<0>(args.dD) < (int64_t(1) << 39) && cute::get<2>(args.dD) < (int64_t(1) << 39));
    return rows && batches && addresses && bias && tma;
  }

  // `params` is the kernel's parameter, where the TMA descriptor must stay (not a copy in registers or local memory).
  CUTLASS_HOST_DEVICE LeanEpilogue(Params const& params, SharedStorage const& = SharedStorage())
      : params_(params), tma_d_(&params.tma_d) {}

  CUTLASS_DEVICE static void prefetch(Params const& params) {
    if constexpr (kStaged) cute::prefetch_tma_descriptor(&params.tma_d);
  }
  // Every TMA store this thread issued has read its chunk: before the CTA's shared memory is left to others (the
  // kernel's end; after each tile in ping-pong kernels, whose other warp group writes the same chunks next).
  CUTLASS_DEVICE static void drain() {
    if constexpr (kStaged) cute::tma_store_wait<0>();
  }

  CUTLASS_DEVICE bool is_source_needed() const { return params_.thread.beta != 0.0f; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK, BlockCoordMNKL blk_coord_mnkl,
                                 cute::Tensor<FrgEngine, FrgLayout> const& accumulators, TiledMma tiled_mma, ResidueMNK,
                                 int thread_idx, char* shared) {
    using namespace cute;
    // The GMMA accumulator layout: per thread ((2 columns, 2 rows 8 apart, G groups 8 columns apart), M, N), the
    // four threads of a quad at columns 0, 2, 4, 6 of each group.
    static_assert(rank<0>(FrgLayout{}) == 3 && size<0, 0>(FrgLayout{}) == 2 && size<0, 1>(FrgLayout{}) == 2,
                  "the lean epilogue takes SM90 GMMA accumulators");
    static_assert(size<0, 2>(FrgLayout{}) % 4 == 0, "the lean epilogue needs CTA tiles whose N is a multiple of 32");
    constexpr int kBlockM = size<0>(BlockShapeMNK{});
    constexpr int kBlockN = size<1>(BlockShapeMNK{});

    Tile tile;
    tile.M = get<0>(problem_shape_mnkl);
    tile.N = get<1>(problem_shape_mnkl);
    const auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    tile.m = int64_t(m_coord) * kBlockM;
    tile.n = int64_t(n_coord) * kBlockN;
    tile.ldc = get<0>(params_.dC);
    tile.ldd = get<0>(params_.dD);
    tile.c = params_.ptr_C + int64_t(l_coord) * int64_t(get<2>(params_.dC));
    tile.d = params_.ptr_D + int64_t(l_coord) * int64_t(get<2>(params_.dD));
    tile.l = int(l_coord);
    tile.quad_lane = thread_idx % 4;
    tile.thread_idx = thread_idx;
    if constexpr (kStaged) {
      static_assert(kBlockM % StagingRows == 0 && size<1>(FrgLayout{}) == kBlockM / StagingRows,
                    "the staged chunks are as high as the kernel's MMA tile");
      tile.staging = cute::cast_smem_ptr_to_uint(reinterpret_cast<SharedStorage*>(shared)->chunks);
    }
    // Each accumulator's (row, column) in the CTA tile.
    auto coords = tiled_mma.get_thread_slice(thread_idx)
                      .partition_C(make_identity_tensor(make_shape(Int<kBlockM>{}, Int<kBlockN>{})));

    // Copies of the unrolled tile walk, each a short stretch of straight code (a kernel whose code outgrows the
    // instruction cache runs at half speed): alpha alone, alpha and a bias (staged stores only), and the general
    // case. Staged stores are clipped at the problem's edges by TMA, so the first two serve edge tiles too; direct
    // stores take the general walk there.
    const LeanEpilogueParams& p = params_.thread;
    const bool unscaled = p.row_scale == nullptr && p.column_scale == nullptr && p.beta == 0.0f;
    const bool inside = kStaged || (tile.m + kBlockM <= tile.M && tile.n + kBlockN <= tile.N);
    constexpr int kThreads = decltype(size(tiled_mma))::value;
    if (unscaled && p.bias_mode == GK_BIAS_NONE && inside) {
      walk<Walk::Alpha, kThreads>(accumulators, coords, tile);
      return;
    }
    if constexpr (kStaged) {
      if (unscaled) {
        walk<Walk::Bias, kThreads>(accumulators, coords, tile);
        return;
      }
    }
    walk<Walk::General, kThreads>(accumulators, coords, tile);
  }

 private:
  // Where this CTA's tile lies.
  struct Tile {
    int64_t M = 0, N = 0, m = 0, n = 0, ldc = 0, ldd = 0;
    GmemElementC const* c = nullptr;
    ElementD* d = nullptr;
    int l = 0;
    int quad_lane = 0;
    int thread_idx = 0;
    uint32_t staging = 0;  // shared-memory address of the staged chunks
  };

  // What a walk computes: alpha * acc; alpha * acc + bias; or scales, bias and C as the launch asks.
  enum class Walk { Alpha, Bias, General };

  // The whole tile, one block of four groups at a time (few values live beside the accumulators). Values past the
  // problem are neither read nor written (loads predicated rather than branched: compact code); Alpha reads nothing
  // and runs on tiles whose stores need no bounds. A block's column values (bias, column scale) are loaded once, in
  // pairs, for all of this thread's rows; its row values once per tile.
  template <Walk kWalk, int kThreads, class Accumulators, class Coords>
  CUTLASS_DEVICE void walk(Accumulators const& accumulators, Coords const& coords, Tile const& tile) {
    using namespace cute;
    constexpr bool kGeneral = kWalk == Walk::General;
    constexpr bool kBias = kWalk != Walk::Alpha;
    constexpr int kGroups = decltype(size<0, 2>(accumulators))::value;
    constexpr int kTilesM = decltype(size<1>(accumulators))::value;
    constexpr int kTilesN = decltype(size<2>(accumulators))::value;
    const LeanEpilogueParams& p = params_.thread;
    auto const* bias = static_cast<ElementBias const*>(p.bias);
    const bool column_bias = p.bias_mode == GK_BIAS_PER_COLUMN;
    const bool source = p.beta != 0.0f;
    cutlass::NumericArrayConverter<ElementD, float, 2, cutlass::FloatRoundStyle::round_to_nearest> convert;
    const auto row_of = [&](int half, int mi) {
      return tile.m + get<0>(coords(make_coord(make_coord(0, half, 0), mi, 0)));
    };
    float row_scales[kTilesM][2], row_biases[kTilesM][2];
    if constexpr (kBias) {
      CUTLASS_PRAGMA_UNROLL
      for (int mi = 0; mi < kTilesM; ++mi) {
        CUTLASS_PRAGMA_UNROLL
        for (int half = 0; half < 2; ++half) {
          const int64_t row = row_of(half, mi);
          const bool row_in = row < tile.M;
          if constexpr (kGeneral) row_scales[mi][half] = p.row_scale != nullptr && row_in ? p.row_scale[row] : 1.0f;
          // alpha * x + -0 is alpha * x, signed zeros included
          row_biases[mi][half] = p.bias_mode == GK_BIAS_PER_ROW && row_in ? float(bias[row]) : -0.0f;
        }
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int ni = 0; ni < kTilesN; ++ni) {
      CUTLASS_PRAGMA_UNROLL
      for (int block = 0; block < kGroups / 4; ++block) {
        const auto column_of = [&](int j) {
          return tile.n + get<1>(coords(make_coord(make_coord(0, 0, 4 * block + j), 0, ni)));
        };
        lean::Pair column_scales[4], column_biases[4];
        if constexpr (kBias) {
          CUTLASS_PRAGMA_UNROLL
          for (int j = 0; j < 4; ++j) {
            if constexpr (kGeneral) column_scales[j] = lean::load_pair(p.column_scale, column_of(j), tile.N, 1.0f);
            column_biases[j] = column_bias ? lean::load_pair(bias, column_of(j), tile.N, 0.0f) : lean::Pair{};
          }
        }
        CUTLASS_PRAGMA_UNROLL
        for (int mi = 0; mi < kTilesM; ++mi) {
          uint32_t words[2][4];  // staged: the block's values as D, [half][group], two per word
          CUTLASS_PRAGMA_UNROLL
          for (int half = 0; half < 2; ++half) {
            const int64_t row = row_of(half, mi);
            const bool row_in = !kGeneral || row < tile.M;
            lean::Block values;
            CUTLASS_PRAGMA_UNROLL
            for (int j = 0; j < 4; ++j) {
              const auto at = [&](int c) { return make_coord(make_coord(c, half, 4 * block + j), mi, ni); };
              lean::Pair c_values{};
              if constexpr (kGeneral) {
                if (source && row_in) c_values = lean::load_pair(tile.c + row * tile.ldc, column_of(j), tile.N, 0.0f);
              }
              CUTLASS_PRAGMA_UNROLL
              for (int c = 0; c < 2; ++c) {
                float x = float(accumulators(at(c)));
                if constexpr (kGeneral) {
                  const float b = column_bias ? column_biases[j][c] : row_biases[mi][half];
                  // alpha * x + bias as CUTLASS's fusions order it (one fma), then beta * C + that (another).
                  x = fmaf(p.alpha, x * row_scales[mi][half] * column_scales[j][c], b);
                  if (source) x = fmaf(p.beta, c_values[c], x);
                } else if constexpr (kBias) {
                  x = fmaf(p.alpha, x, column_bias ? column_biases[j][c] : row_biases[mi][half]);
                } else {
                  x = p.alpha * x;
                }
                values.pairs[j][c] = x;
              }
            }
            if (p.activation != GK_ACTIVATION_IDENTITY) {
              values = lean::activate_block<kApproximate>(values, p.activation, p.activation_parameter);
            }
            if constexpr (kStaged) {
              CUTLASS_PRAGMA_UNROLL
              for (int j = 0; j < 4; ++j) {
                const cutlass::Array<ElementD, 2> out = convert(values.pairs[j]);
                words[half][j] = *reinterpret_cast<uint32_t const*>(&out);
              }
            } else {
              store_block<kGeneral>(values.pairs, row, column_of(0), convert, tile);
            }
          }
          if constexpr (kStaged) {
            // The chunk's first row and column in the problem, and this warp's first row in the chunk.
            const int64_t chunk_row = tile.m + int64_t(mi) * StagingRows;
            const int warp_row = int(row_of(0, mi) - chunk_row) - (tile.thread_idx % 32) / 4;
            stage_chunk<kThreads>(words, chunk_row, column_of(0) - 2 * tile.quad_lane, warp_row, tile);
          }
        }
      }
    }
  }

  // A chunk (rows x 32 columns of a 16-bit D) out through shared memory: each warp's stmatrix writes its 16 rows,
  // then one thread's TMA store takes the chunk to global memory, clipped at the problem's edges. The buffers
  // alternate; before the barrier that lets the threads on to the next chunk, the issuing thread waits until the
  // store that last read the next chunk's buffer is done reading it.
  template <int kThreads>
  CUTLASS_DEVICE void stage_chunk(uint32_t const (&words)[2][4], int64_t chunk_row, int64_t first_column, int warp_row,
                                  Tile const& tile) {
    if (chunk_row >= tile.M || first_column >= tile.N) return;  // the same for every thread of the tile
    const uint32_t base = tile.staging + uint32_t((chunk_++ & 1) * kChunkBytes);
    // stmatrix: lane L gives the address of row L % 8 of matrix L / 8; matrices (rows 0-7 | 8-15) x (group 2p | 2p+1)
    const int lane = tile.thread_idx % 32;
    const int row = warp_row + ((lane / 8) & 1) * 8 + lane % 8;
    CUTLASS_PRAGMA_UNROLL
    for (int pair = 0; pair < 2; ++pair) {
      const uint32_t matrices[4] = {words[0][2 * pair], words[1][2 * pair], words[0][2 * pair + 1],
                                    words[1][2 * pair + 1]};
      lean::store_matrices(matrices, lean::swizzled_granule(base, row, 2 * pair + lane / 16));
    }
    cute::tma_store_fence();
    if (tile.thread_idx == 0) cute::tma_store_wait<0>();
    cutlass::arch::NamedBarrier::sync(kThreads, cutlass::arch::ReservedNamedBarriers::EpilogueBarrier);
    if (tile.thread_idx == 0) {
      lean::tma_store(tma_d_, base, int(first_column), int(chunk_row), tile.l);
      cute::tma_store_arrive();
    }
  }

  // Converts a block (this lane's pairs of four groups) to D, trades pairs within the quad until this lane holds the
  // eight columns of group quad_lane, and stores them: `column` is this lane's column in the block's first group.
  template <bool kBounded, class Convert>
  CUTLASS_DEVICE void store_block(lean::Pair const (&values)[4], int64_t row, int64_t column, Convert const& convert,
                                  Tile const& tile) const {
    uint32_t items[kPairWords][4];  // items[w][j]: word w of the pair of group j
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 4; ++j) {
      const cutlass::Array<ElementD, 2> out = convert(values[j]);
      uint32_t const* words = reinterpret_cast<uint32_t const*>(&out);
      CUTLASS_PRAGMA_UNROLL
      for (int w = 0; w < kPairWords; ++w) items[w][j] = words[w];
    }
    CUTLASS_PRAGMA_UNROLL
    for (int w = 0; w < kPairWords; ++w) {
      lean::quad_exchange<2>(items[w], tile.quad_lane);
      lean::quad_exchange<1>(items[w], tile.quad_lane);
    }
    // Pair j of this lane's group came from quad lane j; the group starts 8 * quad_lane columns into the block.
    const int64_t first = column - 2 * tile.quad_lane + 8 * tile.quad_lane;
    if (kBounded && row >= tile.M) return;
    uint32_t words[4 * kPairWords];
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 4; ++j) {
      CUTLASS_PRAGMA_UNROLL
      for (int w = 0; w < kPairWords; ++w) words[j * kPairWords + w] = items[w][j];
    }
    ElementD* out = tile.d + row * tile.ldd + first;
    if (!kBounded || first + 8 <= tile.N) {
      CUTLASS_PRAGMA_UNROLL
      for (int v = 0; v < kPairWords; ++v) {
        reinterpret_cast<uint4*>(out)[v] =
            make_uint4(words[4 * v], words[4 * v + 1], words[4 * v + 2], words[4 * v + 3]);
      }
    } else {
      ElementD const* elements = reinterpret_cast<ElementD const*>(words);
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < 8; ++e) {
        if (first + e < tile.N) out[e] = elements[e];
      }
    }
  }

  Arguments params_;
  cute::TmaDescriptor const* tma_d_;
  int chunk_ = 0;  // staged chunks this thread has written, over the CTA's tiles: which buffer is next
};

// CUTLASS's adapter for operator-style epilogues, with the staged stores' descriptor prefetch and their drain at the
// store tail (the adapter's own does nothing).
template <class EpilogueOp>
class LeanAdapter : public cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<EpilogueOp> {
  using Base = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<EpilogueOp>;

 public:
  using Base::Base;

  CUTLASS_DEVICE static void prefetch_tma_descriptors(typename EpilogueOp::Params const& params) {
    EpilogueOp::prefetch(params);
  }

  template <class... Pipelines>
  CUTLASS_DEVICE auto store_tail(Pipelines... pipelines) {
    EpilogueOp::drain();
    return Base::store_tail(pipelines...);
  }
};

// The collective epilogue a GemmUniversal kernel takes; StagingRows as LeanEpilogue's.
template <class ElementC, class StrideC, class ElementD, class StrideD, class ElementBias, int StagingRows = 0>
using LeanCollectiveEpilogue =
    LeanAdapter<LeanEpilogue<ElementC, StrideC, ElementD, StrideD, ElementBias, StagingRows>>;

}  // namespace gemmkit::sm90
