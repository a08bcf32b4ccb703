// include/gemmkit/types.hpp: what gemmkit knows about element types beyond their names (see enums.hpp).
#pragma once

#include "gemmkit/enums.hpp"

namespace gemmkit {

// Layout letter used in kernel names: RowMajor = 't', ColumnMajor = 'n'.
inline char layout_letter(Layout layout) {
  return row_of(layout).in_kernel_name[0];
}

int bits_of(DataType type);
bool is_integer(DataType type);
// e4m3 or e5m2: the 8-bit floats of SM90 tensor cores.
bool is_fp8(DataType type);

}  // namespace gemmkit
