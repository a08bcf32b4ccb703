// device/include/gemmkit/launch_glue.hpp: which glue an entry header (module_entry.hpp, conv2d_entry.hpp,
// grouped_entry.hpp) prepares and launches with: the family's own, or in the split path's host module the same glue
// launching the cubin (split_entry.hpp). A split build compiles one source twice: GEMMKIT_SPLIT_DEVICE for the cubin,
// GEMMKIT_SPLIT_HOST for the host module.
#pragma once

#if defined(GEMMKIT_SPLIT_DEVICE) || defined(GEMMKIT_SPLIT_HOST)
#include "gemmkit/split_entry.hpp"
#endif

namespace gemmkit {
#if defined(GEMMKIT_SPLIT_HOST)
template <class Module>
using LaunchGlue = split::Glue<Module>;
template <class Module>
using GroupedLaunchGlue = split::GroupedGlue<Module>;
#else
template <class Module>
using LaunchGlue = Module;
template <class Module>
using GroupedLaunchGlue = Module;
#endif
}  // namespace gemmkit
