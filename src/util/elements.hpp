// src/util/elements.hpp: one element of a host buffer of any gemmkit element type, as a double.
#pragma once

#include <cstddef>

#include "gemmkit/types.hpp"

namespace gemmkit::util {

// Element `index` of `data` (f16, bf16, e4m3 and e5m2 converted exactly; void_t reads 0).
double element_value(DataType dtype, const void* data, std::size_t index);

}  // namespace gemmkit::util
