// device/include/gemmkit/cute_stride.hpp: CuTe strides from the ABI's leading dimensions and batch strides, for the
// 3.x kernels' operands and both generations' visitor-tree nodes.
#pragma once

#include <cstdint>

#include "cute/tensor.hpp"

namespace gemmkit::module {

// A CuTe stride (M|N, K|N, L) of a layout tag with its one dynamic leading mode set to ld and L to batch_stride.
template <class Stride>
Stride make_stride(int64_t ld, int64_t batch_stride) {
  Stride stride{};
  if constexpr (cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(stride))>>::value) {
    cute::get<1>(stride) = ld;
  } else {
    cute::get<0>(stride) = ld;
  }
  if constexpr (!cute::is_static<cute::remove_cvref_t<decltype(cute::get<2>(stride))>>::value) {
    cute::get<2>(stride) = batch_stride;
  }
  return stride;
}

}  // namespace gemmkit::module
