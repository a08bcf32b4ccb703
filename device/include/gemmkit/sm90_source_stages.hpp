// device/include/gemmkit/sm90_source_stages.hpp: CUTLASS's TMA epilogue with fewer stages of C in shared memory, for
// the kernels where that leaves room for one more mainloop stage.
//
// The epilogue builder keeps four stages of C (min(subtiles, 4)) and, where C and D have one width, stores D through
// C's buffers. On the FP8 128 x 192 tile with a 16-bit C those four stages take 33.8 KB, and the mainloop gets four
// 40 KB stages; with three (the fewest a store through C's buffers allows: D's two stages and one more) the epilogue
// takes 25.6 KB and the mainloop five, as it has without C. The FP8 mainloop loads K in 128-deep steps, so a stage
// more keeps the tensor cores fed; C's loads run one subtile less ahead, which costs nothing when beta is 0 (no C is
// read) and little otherwise.
#pragma once

#include "gemmkit/sm90_fp8_overlap.hpp"

namespace gemmkit::sm90 {

namespace detail {

// CUTLASS's fusion operations (FusionCallbacks) are specialized on the epilogue's dispatch policy too: rebind them
// with it. A visitor tree of gemmkit's (the scale vectors' fusion) does not name the policy and stays as it is.
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
  static_assert(ReuseSmemC && StagesC > StagesD && StagesC < OldStagesC,
                "fewer C stages than the builder's, and more than D's (D is stored through C's buffers)");
  using Policy = cutlass::epilogue::Sm90TmaWarpSpecialized<StagesC, StagesD, FragmentSize, ReuseSmemC, DelayTmaStore>;
  using type =
      cutlass::epilogue::collective::CollectiveEpilogue<Policy, CtaTile, EpilogueTile, ElementC, StrideC, ElementD,
                                                        StrideD, typename RebindCallbacks<Callbacks, Policy>::type,
                                                        Copies...>;
};

}  // namespace detail

// The builder's epilogue (Epilogue) with three stages of C.
template <class Epilogue>
using ThreeSourceStages = typename detail::WithSourceStages<Epilogue, 3>::type;

}  // namespace gemmkit::sm90
