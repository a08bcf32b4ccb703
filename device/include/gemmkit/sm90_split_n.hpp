// device/include/gemmkit/sm90_split_n.hpp: glue for Sm90Collective kernels whose two consumer warp groups split the
// CTA tile along N (kernel schedule TmaWarpSpecializedCooperativeSplitN), so that 192-row tiles exist: CUTLASS's
// builders give the cooperative kernel warp groups that split M (AtomLayout 2x1x1), which needs a multiple of 128
// rows. The mainloop is CUTLASS's TMA warp-specialized cooperative CollectiveMma with a TiledMma of one 64 x N/2 GMMA
// atom per warp group laid out 1x2x1 (each warp group walks all rows of the tile, three atoms deep for 192); its copy
// atoms, A's shared-memory layout and the stage count are the builder's for the same tile. The epilogue is CUTLASS's
// TMA epilogue, assembled here because its builder takes cooperative tiles of 128 rows only: epilogue subtiles of 64 x
// N (a narrower subtile would split each warp group's columns, which its store-to-shared-memory copy cannot), and a
// shared-memory swizzle no wider than half the tile's columns, the extent one warp group writes.
#pragma once

// GMMA atoms whose N is not a multiple of 32 (the 64 x 80 of a 160-wide tile) are declared only with this switch; it
// comes before CuTe's headers, so a generated source includes this header first.
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#endif

#include "gemmkit/sm90_gemm.hpp"

namespace gemmkit::sm90 {

template <class CtaTile, class ClusterShape, class ElementA, class LayoutA, int AlignmentA, class ElementB,
          class LayoutB, int AlignmentB, class ElementAccumulator, class ElementCompute, class ElementC, class LayoutC,
          int AlignmentC, class ElementD, int AlignmentD, class Fusion, int Stages>
struct SplitNCollectives {
  static constexpr int kRows = cute::size<0>(CtaTile{});
  static constexpr int kColumns = cute::size<1>(CtaTile{});
  static constexpr int kDepth = cute::size<2>(CtaTile{});
  static constexpr int kHalfColumns = kColumns / 2;  // what one warp group computes
  static_assert(kRows % 64 == 0, "each warp group walks the tile's rows in 64-row GMMA atoms");

  using EpilogueTile = cute::Shape<cute::_64, cute::Int<kColumns>>;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using Dispatch =
      decltype(cutlass::epilogue::collective::detail::sm90_get_tma_dispatch_policy<CtaTile, EpilogueTile, ElementC,
                                                                                   ElementD, EpilogueSchedule>());
  using Impl =
      cutlass::epilogue::collective::detail::Sm90TmaBuilderImpl<CtaTile, EpilogueTile, ElementAccumulator,
                                                                ElementCompute, ElementC, LayoutC, AlignmentC, ElementD,
                                                                LayoutC, AlignmentD, Fusion, Dispatch>;
  using StrideC = cutlass::detail::TagToStrideC_t<LayoutC>;
  // Row-major C and D: their rows are K-major in CuTe's terms, swizzled at most as wide as one warp group's columns.
  using SmemAtom = decltype(cutlass::gemm::collective::detail::ss_smem_selector<cute::GMMA::Major::K, ElementD,
                                                                                cute::_64, cute::Int<kHalfColumns>>());
  using Epilogue = cutlass::epilogue::collective::CollectiveEpilogue<
      Dispatch, CtaTile, EpilogueTile, ElementC, StrideC, ElementD, StrideC, typename Impl::FusionCallbacks,
      cute::SM90_TMA_LOAD, SmemAtom,
      decltype(cutlass::epilogue::collective::detail::sm90_get_smem_load_op_for_source<StrideC, ElementC,
                                                                                       EpilogueTile>()),
      cute::SM90_TMA_STORE, SmemAtom,
      decltype(cutlass::epilogue::collective::detail::sm90_get_smem_store_op_for_accumulator<StrideC, ElementD,
                                                                                             EpilogueTile>()),
      typename Impl::CopyAtomC, void>;

  // The builder's pieces for this tile (its own TiledMma, which would split M, is not used).
  using Builder = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, LayoutA, AlignmentA, ElementB, LayoutB, AlignmentB,
      ElementAccumulator, CtaTile, ClusterShape, StageCount<Stages, Epilogue>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
  static constexpr cute::GMMA::Major kMajorA =
      cutlass::gemm::collective::detail::gmma_ss_tag_to_major_A<ElementA, LayoutA>();
  static constexpr cute::GMMA::Major kMajorB =
      cutlass::gemm::collective::detail::gmma_ss_tag_to_major_B<ElementB, LayoutB>();
  using Atom = decltype(cute::GMMA::ss_op_selector<ElementA, ElementB, ElementAccumulator,
                                                   cute::Shape<cute::_64, cute::Int<kHalfColumns>, cute::Int<kDepth>>,
                                                   kMajorA, kMajorB>());
  using TiledMma = decltype(cute::make_tiled_mma(Atom{}, cute::Layout<cute::Shape<cute::_1, cute::_2, cute::_1>>{}));
  // B's shared-memory swizzle atom sized by one warp group's columns: an N-major B's atom spans its width along N, and
  // each warp group's GMMA descriptors start at half the tile's columns.
  using SmemLayoutAtomB =
      decltype(cutlass::gemm::collective::detail::ss_smem_selector<kMajorB, ElementB, cute::Int<kHalfColumns>,
                                                                   cute::Int<kDepth>>());
  static_assert(cute::size<1>(typename TiledMma::AtomShape_MNK{}) == kHalfColumns,
                "no GMMA atom spans half the tile's columns");
  using Mainloop = cutlass::gemm::collective::CollectiveMma<
      typename Builder::DispatchPolicy, CtaTile, ElementA, cutlass::gemm::TagToStrideA_t<LayoutA>, ElementB,
      cutlass::gemm::TagToStrideB_t<LayoutB>, TiledMma, typename Builder::GmemTiledCopyA,
      typename Builder::SmemLayoutAtomA, void, cute::identity, typename Builder::GmemTiledCopyB, SmemLayoutAtomB, void,
      cute::identity>;
};

}  // namespace gemmkit::sm90
