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

#include "gemmkit/sm90_epilogue_stages.hpp"
#include "gemmkit/sm90_fp8_overlap.hpp"

namespace gemmkit::sm90 {

// The builder's epilogue (Epilogue) with three stages of C.
template <class Epilogue>
using ThreeSourceStages = SourceStages<Epilogue, 3>;

}  // namespace gemmkit::sm90
