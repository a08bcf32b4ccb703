// device/include/gemmkit/sm90_fp8_overlap.hpp: gemmkit's FP8 mainloops for CUTLASS's cooperative and ping-pong SM90
// kernels, whose promotion overlaps the tensor cores' work.
//
// CUTLASS's FP8 mainloop issues a K tile's GMMAs into a set of partial accumulators, waits until all of them are done
// and adds the partials into the f32 accumulators: while a warp group adds, its tensor-core queue is empty.
//
// Fp8OverlappedPromotion (kernel schedules TmaWarpSpecialized{Cooperative,Pingpong}FP8Overlap) issues each K tile as
// two batches of GMMAs, one per half of the tile's columns, into the two halves of the partials, and adds one half
// while the other half's batch runs, so the queue is empty only while a batch is issued:
//
//   K tile k:  wait for half 1 (k-1) | issue half 0 (k) | add half 1 (k-1), release stage k-1 | issue half 1 (k) |
//              wait for half 0 (k) | add half 0 (k)
//
// The promotion stays once per 128-deep K tile (CUTLASS's default interval; the runtime interval argument is not
// read), so the sums are CUTLASS's and torch._scaled_mm's, bit for bit. The registers are CUTLASS's too: the f32
// accumulators and one set of partials. Each half's GMMAs read the tile's rows of A again (a quarter more
// shared-memory reads per K tile). Everything but the consumer's loop (TMA loads, pipeline, shared-memory layouts,
// the kernel and its epilogue, which see the builder's TiledMma) is the builder's collective, which both derive.
//
// Fp8AlternatingPromotion (kernel schedules TmaWarpSpecialized{Cooperative,Pingpong}FP8AlternatingPromotion) overlaps
// the same way without reading A twice: whole K tiles alternate between two sets of partials, and one set is added
// while the next K tile's batch runs into the other. It holds three sets of a warp group's tile in registers
// (accumulators and two partials), so only a 64 x 128 tile per warp group fits.
#pragma once

#include "gemmkit/sm90_gemm.hpp"

namespace gemmkit::sm90 {

// What both loops take from the builder's collective, the rules they rely on, and an empty mma_tail: mma() releases
// every stage it reads and waits for every GMMA.
template <class BuilderMainloop>
struct Fp8ConsumerLoop : BuilderMainloop {
  using Base = BuilderMainloop;
  using typename Base::DispatchPolicy;
  using typename Base::ElementA;
  using typename Base::ElementAccumulator;
  using typename Base::ElementB;
  using typename Base::MainloopPipeline;
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using typename Base::TensorStorage;
  using typename Base::TiledMma;
  using typename Base::TileShape;

  static_assert(
      cute::is_same_v<DispatchPolicy, cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<
                                          DispatchPolicy::Stages, typename DispatchPolicy::ClusterShape,
                                          typename DispatchPolicy::Schedule>>,
      "the overlapped promotion replaces the loop of CUTLASS's FP8 mainloop (promoted, not fast accumulation)");
  static constexpr int kWarpGroups = cute::size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
  static_assert(cute::size<2>(typename TiledMma::ThrLayoutVMNK{}) == 1,
                "the builder's warp groups split the tile's rows, so each holds all of its columns");
  static constexpr int kColumns = cute::size<1>(TileShape{});
  static constexpr int kDepth = cute::size<2>(TileShape{});
  static_assert(kDepth == 128, "one promotion per K tile is CUTLASS's interval of 128 elements of K");
  static_assert(cute::size<1>(typename TiledMma::AtomShape_MNK{}) == kColumns,
                "each warp group's GMMA atom spans the tile's columns (so MMA_N is 1)");

  // The GMMA descriptors of A and B in shared memory, (MMA,MMA_M,MMA_K,PIPE) and (MMA,MMA_N,MMA_K,PIPE), for `mma`'s
  // slice of this thread's warp group.
  template <class Mma>
  CUTLASS_DEVICE static auto operand_descriptors(Mma& mma, int thread_idx, TensorStorage& shared_tensors) {
    using namespace cute;
    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});  // (BLK_M,BLK_K,PIPE)
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});  // (BLK_N,BLK_K,PIPE)
    Layout warp_group_thread_layout = make_layout(Int<kWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    const int warp_group_idx = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
    auto thread_mma = mma.get_slice(warp_group_thread_layout(warp_group_idx));
    return make_tuple(thread_mma.make_fragment_A(thread_mma.partition_A(sA)),
                      thread_mma.make_fragment_B(thread_mma.partition_B(sB)));
  }

  CUTLASS_DEVICE void mma_tail(MainloopPipeline, PipelineState, int) {}
};

template <class BuilderMainloop>
struct Fp8OverlappedPromotion : Fp8ConsumerLoop<BuilderMainloop> {
  using Loop = Fp8ConsumerLoop<BuilderMainloop>;
  using typename Loop::ElementA;
  using typename Loop::ElementAccumulator;
  using typename Loop::ElementB;
  using typename Loop::MainloopPipeline;
  using typename Loop::Params;
  using typename Loop::PipelineState;
  using typename Loop::TensorStorage;
  using typename Loop::TileShape;
  static constexpr int kWarpGroups = Loop::kWarpGroups;
  static constexpr int kColumns = Loop::kColumns;
  static constexpr int kDepth = Loop::kDepth;
  static_assert(kColumns % 32 == 0, "each half is a GMMA atom of its own, a multiple of 16 columns wide");

  // One warp group's GMMAs over half of the tile's columns; its accumulator layout is the first (or last) half of the
  // full atom's, whose values run over column blocks of 8 outermost (cute's CLayout_64xN).
  using HalfAtom =
      decltype(cute::GMMA::ss_op_selector<ElementA, ElementB, ElementAccumulator,
                                          cute::Shape<cute::_64, cute::Int<kColumns / 2>, cute::Int<kDepth>>,
                                          cute::GMMA::Major::K, cute::GMMA::Major::K>());
  using HalfMma = decltype(cute::make_tiled_mma(
      HalfAtom{}, cute::Layout<cute::Shape<cute::Int<kWarpGroups>, cute::_1, cute::_1>>{}));
  static_assert(cute::size<1>(typename HalfMma::AtomShape_MNK{}) == kColumns / 2, "no GMMA atom spans half the tile");

  // accum (full atom: ((2, 2, kColumns / 8), MMA_M, 1)) += partial's half (((2, 2, kColumns / 16), MMA_M, 2)).
  // Called after the wait that retires the half's GMMAs; the fence keeps the compiler from hoisting the adds above it
  // (the wait names no registers).
  template <int Half, class Accumulators, class Partials>
  CUTLASS_DEVICE static void promote(Accumulators& accum, Partials& partial) {
    auto half_partial = partial(cute::_, cute::_, cute::Int<Half>{});
    cute::warpgroup_fence_operand(half_partial);
    constexpr int kBlocks = decltype(cute::size<0, 2>(partial))::value;
    static_assert(decltype(cute::size<0, 2>(accum))::value == 2 * kBlocks, "accumulators of the full atom");
    CUTLASS_PRAGMA_UNROLL
    for (int m = 0; m < cute::size<1>(partial); ++m) {
      CUTLASS_PRAGMA_UNROLL
      for (int block = 0; block < kBlocks; ++block) {
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 2; ++j) {
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < 2; ++i) {
            accum(cute::make_coord(cute::make_coord(i, j, block + Half * kBlocks), m, 0)) +=
                partial(cute::make_coord(cute::make_coord(i, j, block), m, Half));
          }
        }
      }
    }
  }

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum, int k_tile_count,
                          int thread_idx, TensorStorage& shared_tensors, Params const&) {
    using namespace cute;
    static_assert(is_rmem<FrgTensorC>::value, "C tensor must be rmem resident.");
    HalfMma half_mma;
    const auto descriptors = Loop::operand_descriptors(half_mma, thread_idx, shared_tensors);
    Tensor tCrA = get<0>(descriptors);                                         // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCrB = get<1>(descriptors);                                         // (MMA,2,MMA_K,PIPE): the two halves
    Tensor partial = partition_fragment_C(half_mma, take<0, 2>(TileShape{}));  // (MMA,MMA_M,2)
    CUTE_STATIC_ASSERT_V(size<1>(tCrB) == Int<2>{});
    CUTE_STATIC_ASSERT_V(size<2>(partial) == Int<2>{});
    CUTE_STATIC_ASSERT_V(size<1>(partial) == size<1>(accum));
    CUTE_STATIC_ASSERT_V(size(partial) == size(accum));

    // One batch of GMMAs: a K tile of one half into that half's partials (zeroed by the first GMMA).
    auto issue = [&](auto half, int stage) {
      Tensor half_partial = partial(_, _, half);
      warpgroup_fence_operand(half_partial);
      warpgroup_arrive();
      half_mma.accumulate_ = GMMA::ScaleOut::Zero;
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
        CUTLASS_PRAGMA_UNROLL
        for (int m = 0; m < size<1>(tCrA); ++m) {
          cute::gemm(half_mma, tCrA(_, m, k_block, stage), tCrB(_, half, k_block, stage), half_partial(_, m));
        }
        half_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_fence_operand(half_partial);
    };

    clear(accum);
    warpgroup_fence_operand(accum);
    if (k_tile_count <= 0) return;
    PipelineState smem_pipe_release = smem_pipe_read;

    pipeline.consumer_wait(smem_pipe_read, pipeline.consumer_try_wait(smem_pipe_read));
    issue(_0{}, smem_pipe_read.index());
    issue(_1{}, smem_pipe_read.index());
    warpgroup_wait<1>();
    promote<0>(accum, partial);
    ++smem_pipe_read;

    CUTLASS_PRAGMA_NO_UNROLL
    for (--k_tile_count; k_tile_count > 0; --k_tile_count) {
      pipeline.consumer_wait(smem_pipe_read, pipeline.consumer_try_wait(smem_pipe_read));
      const int read_stage = smem_pipe_read.index();
      // The previous tile's half 1 is retired before this tile's half 0 is issued, not after: ptxas serializes every
      // GMMA of a loop whose body reads the partials of a batch issued in an earlier iteration after a wait that
      // leaves a batch in flight (C7514). Its batch has run through the previous half 0's promotion, so the queue
      // is empty only while this batch is issued.
      warpgroup_wait<0>();
      issue(_0{}, read_stage);
      promote<1>(accum, partial);
      pipeline.consumer_release(smem_pipe_release);
      ++smem_pipe_release;
      issue(_1{}, read_stage);
      warpgroup_wait<1>();  // this tile's half 0
      promote<0>(accum, partial);
      ++smem_pipe_read;
    }

    warpgroup_wait<0>();
    promote<1>(accum, partial);
    pipeline.consumer_release(smem_pipe_release);
    warpgroup_fence_operand(accum);
  }
};

template <class BuilderMainloop>
struct Fp8AlternatingPromotion : Fp8ConsumerLoop<BuilderMainloop> {
  using Loop = Fp8ConsumerLoop<BuilderMainloop>;
  using typename Loop::MainloopPipeline;
  using typename Loop::Params;
  using typename Loop::PipelineState;
  using typename Loop::TensorStorage;
  using typename Loop::TiledMma;
  static constexpr int kWarpGroups = Loop::kWarpGroups;
  static_assert(cute::size<0>(typename Loop::TileShape{}) / kWarpGroups * Loop::kColumns <= 64 * 128,
                "three sets of a warp group's tile in registers: at most 64 x 128");

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum, int k_tile_count,
                          int thread_idx, TensorStorage& shared_tensors, Params const&) {
    using namespace cute;
    static_assert(is_rmem<FrgTensorC>::value, "C tensor must be rmem resident.");
    TiledMma tiled_mma;
    const auto descriptors = Loop::operand_descriptors(tiled_mma, thread_idx, shared_tensors);
    Tensor tCrA = get<0>(descriptors);        // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCrB = get<1>(descriptors);        // (MMA,MMA_N,MMA_K,PIPE)
    Tensor even = make_fragment_like(accum);  // the partials of K tiles 0, 2, 4, ...
    Tensor odd = make_fragment_like(accum);   // and of 1, 3, 5, ...

    // One batch of GMMAs: a K tile into a set of partials (zeroed by the first GMMA).
    auto issue = [&](auto& partials, int stage) {
      warpgroup_fence_operand(partials);
      warpgroup_arrive();
      tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
        cute::gemm(tiled_mma, tCrA(_, _, k_block, stage), tCrB(_, _, k_block, stage), partials);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_fence_operand(partials);
    };
    // After the wait that retires the set's batch; the fence keeps the adds below that wait.
    auto promote = [&](auto& partials) {
      warpgroup_fence_operand(partials);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) += partials(i);
    };
    auto next_stage = [&] {
      pipeline.consumer_wait(smem_pipe_read, pipeline.consumer_try_wait(smem_pipe_read));
      const int stage = smem_pipe_read.index();
      ++smem_pipe_read;
      --k_tile_count;
      return stage;
    };
    PipelineState smem_pipe_release = smem_pipe_read;
    auto release = [&] {
      pipeline.consumer_release(smem_pipe_release);
      ++smem_pipe_release;
    };

    // The last batch: wait for it, add it, release its stage. Each exit has its own, so that where paths join the same
    // set is in flight on each (ptxas serializes the kernel's GMMAs where it cannot tell which).
    auto finish = [&](auto& partials) {
      warpgroup_wait<0>();
      promote(partials);
      release();
      warpgroup_fence_operand(accum);
    };

    clear(accum);
    warpgroup_fence_operand(accum);
    if (k_tile_count <= 0) return;
    issue(even, next_stage());
    if (k_tile_count == 0) return finish(even);
    issue(odd, next_stage());
    warpgroup_wait<1>();
    promote(even);
    release();
    // As in the other loop: the odd batch, issued an iteration earlier, is retired before the next even batch is
    // issued, not after.
    CUTLASS_PRAGMA_NO_UNROLL
    while (k_tile_count > 0) {
      const int stage = next_stage();
      warpgroup_wait<0>();
      issue(even, stage);
      promote(odd);
      release();
      if (k_tile_count == 0) return finish(even);
      issue(odd, next_stage());
      warpgroup_wait<1>();
      promote(even);
      release();
    }
    finish(odd);
  }
};

}  // namespace gemmkit::sm90
