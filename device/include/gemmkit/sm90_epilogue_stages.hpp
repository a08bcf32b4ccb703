// device/include/gemmkit/sm90_epilogue_stages.hpp: CUTLASS's TMA epilogue with another count of C stages, and the
// epilogue layout a visitor tree takes: the builder's, or half-wide subtiles with fewer stages where that leaves the
// mainloop one more stage.
//
// The epilogue builder stages C (and every aux load of a visitor tree) in min(subtiles, 4) buffers and D (and every aux
// store) in two. A tree that loads an aux matrix and stores a second output beside C and D takes 80 KB on a 128 x 256
// f16 tile, which leaves the mainloop three 48 KB stages where the plain epilogue leaves four. Subtiles half as wide
// with three stages of C take 32 KB, as the plain epilogue does, and the mainloop keeps its fourth stage.
#pragma once

#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"

namespace gemmkit::sm90 {

namespace detail {

// CUTLASS's fusion operations (FusionCallbacks) are specialized on the epilogue's dispatch policy too: rebind them
// with it. A visitor tree (gemmkit's scale vectors, or a user's) does not name the policy and stays as it is.
template <class Callbacks, class Policy>
struct RebindCallbacks {
  using type = Callbacks;
};

template <class OldPolicy, class Operation, class... Rest, class Policy>
struct RebindCallbacks<cutlass::epilogue::fusion::FusionCallbacks<OldPolicy, Operation, Rest...>, Policy> {
  using type = cutlass::epilogue::fusion::FusionCallbacks<Policy, Operation, Rest...>;
};

template <class Epilogue, int StagesC>
struct WithSourceStages;

template <int OldStagesC, int StagesD, int FragmentSize, bool ReuseSmemC, bool DelayTmaStore, class CtaTile,
          class EpilogueTile, class ElementC, class StrideC, class ElementD, class StrideD, class Callbacks,
          class... Copies, int StagesC>
struct WithSourceStages<
    cutlass::epilogue::collective::CollectiveEpilogue<
        cutlass::epilogue::Sm90TmaWarpSpecialized<OldStagesC, StagesD, FragmentSize, ReuseSmemC, DelayTmaStore>,
        CtaTile, EpilogueTile, ElementC, StrideC, ElementD, StrideD, Callbacks, Copies...>,
    StagesC> {
  static_assert(StagesC >= 1 && StagesC <= OldStagesC && (!ReuseSmemC || StagesC > StagesD),
                "at most the builder's C stages, and more than D's where D is stored through C's buffers");
  using Policy = cutlass::epilogue::Sm90TmaWarpSpecialized<StagesC, StagesD, FragmentSize, ReuseSmemC, DelayTmaStore>;
  using type =
      cutlass::epilogue::collective::CollectiveEpilogue<Policy, CtaTile, EpilogueTile, ElementC, StrideC, ElementD,
                                                        StrideD, typename RebindCallbacks<Callbacks, Policy>::type,
                                                        Copies...>;
};

}  // namespace detail

// The builder's epilogue (Epilogue) with StagesC stages of C (and of a visitor tree's aux loads).
template <class Epilogue, int StagesC>
using SourceStages = typename detail::WithSourceStages<Epilogue, StagesC>::type;

// What a visitor tree's aux load and store nodes read of CUTLASS's EpilogueDescriptor, for the builder's subtiles
// (Narrow = false) or for subtiles half as wide with the fewest stages of C the epilogue allows (D's two and one more
// where D is stored through C's buffers, else two).
template <class CtaTile, class ElementC, class ElementD, class Schedule, bool Narrow>
struct VisitorEpilogueDescriptor {
  using Builder = cutlass::epilogue::collective::detail::EpilogueDescriptor<
      CtaTile, cutlass::epilogue::collective::EpilogueTileAuto, ElementC, ElementD, Schedule>;
  using TileShape = CtaTile;
  using EpilogueTile = std::conditional_t<
      Narrow,
      cute::Shape<decltype(cute::size<0>(typename Builder::EpilogueTile{})),
                  cute::Int<decltype(cute::size<1>(typename Builder::EpilogueTile{}))::value / 2>>,
      typename Builder::EpilogueTile>;
  static constexpr int StagesD = Builder::StagesD;
  static constexpr int StagesC =
      Narrow ? (Builder::DispatchPolicy::ReuseSmemC ? StagesD + 1 : 2) : Builder::StagesC;
};

// Mainloop stages beside an epilogue, as the mainloop builder counts them when left to fill shared memory.
template <class ElementA, class ElementB, class CtaTile, class Epilogue>
constexpr int mainloop_stages_beside() {
  return cutlass::gemm::collective::detail::compute_stage_count_or_override<
      cutlass::gemm::collective::detail::sm90_smem_capacity_bytes, ElementA, ElementB, CtaTile>(
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>{});
}

namespace detail {

// The narrow epilogue where it gives the mainloop more stages than the wide one's (instantiated only when offered).
template <bool Offered, template <class> class Tree, class Narrow, class WideEpilogue, int WideStages, class ElementA,
          class ElementB, class CtaTile>
struct PickVisitorEpilogue {
  using type = WideEpilogue;
};

template <template <class> class Tree, class Narrow, class WideEpilogue, int WideStages, class ElementA,
          class ElementB, class CtaTile>
struct PickVisitorEpilogue<true, Tree, Narrow, WideEpilogue, WideStages, ElementA, ElementB, CtaTile> {
  using NarrowEpilogue = typename Tree<Narrow>::Epilogue;
  using type =
      std::conditional_t<(mainloop_stages_beside<ElementA, ElementB, CtaTile, NarrowEpilogue>() > WideStages),
                         NarrowEpilogue, WideEpilogue>;
};

}  // namespace detail

// A visitor tree's epilogue: Tree<Descriptor>::Epilogue on the builder's subtiles, or on the narrow ones where the
// tree may take them (Offered: every tensor it stages at least 16 bits wide, the mainloop's stages left to fill shared
// memory) and that gives a mainloop of fewer than four stages one more.
template <template <class> class Tree, class Wide, class Narrow, bool Offered, class ElementA, class ElementB,
          class CtaTile>
struct ChooseVisitorEpilogue {
  using WideEpilogue = typename Tree<Wide>::Epilogue;
  static constexpr int kWideStages = mainloop_stages_beside<ElementA, ElementB, CtaTile, WideEpilogue>();
  using type = typename detail::PickVisitorEpilogue<Offered && (kWideStages < 4), Tree, Narrow, WideEpilogue,
                                                    kWideStages, ElementA, ElementB, CtaTile>::type;
};

}  // namespace gemmkit::sm90
