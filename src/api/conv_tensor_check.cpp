// src/api/conv_tensor_check.cpp: see conv_tensor_check.hpp.
#include "api/conv_tensor_check.hpp"

#include <algorithm>
#include <cstdint>

#include "gemmkit/errors.hpp"
#include "gemmkit/types.hpp"

namespace gemmkit::detail {

std::string extent_text(const Extent& e) {
  return "(" + std::to_string(e[0]) + ", " + std::to_string(e[1]) + ", " + std::to_string(e[2]) + ", " +
         std::to_string(e[3]) + ")";
}

Roles roles(ConvKind kind) {
  switch (kind) {
    case ConvKind::Fprop: return {"A (input, NHWC)", "B (weight, KRSC)", "D (output, NPQK)"};
    case ConvKind::Dgrad: return {"A (grad_output, NPQK)", "B (weight, KRSC)", "D (grad_input, NHWC)"};
    case ConvKind::Wgrad: return {"A (grad_output, NPQK)", "B (input, NHWC)", "D (grad_weight, KRSC)"};
  }
  return {"A", "B", "D"};
}

Extent check_packed(const TensorView& t, const std::string& name, DataType dtype) {
  if (t.dtype != dtype) {
    throw TensorError("Tensor " + name + " has element type " + std::string(to_string(t.dtype)) +
                      " but the plan expects " + std::string(to_string(dtype)) +
                      ". Convert the tensor or declare the plan with this element type.");
  }
  if (t.rank != 4) {
    throw TensorError("Tensor " + name +
                      " must be 4-D (channels innermost: NHWC activations, KRSC filters); got shape " +
                      t.shape_string() + ".");
  }
  Extent e{t.shape[0], t.shape[1], t.shape[2], t.shape[3]};
  std::int64_t expected = 1;
  for (int i = 3; i >= 0; --i) {
    if (e[i] < 0) throw TensorError("Tensor " + name + " has a negative extent: " + t.shape_string() + ".");
    if (e[i] > 1 && t.strides[i] != expected) {
      throw TensorError("Tensor " + name + " has shape " + t.shape_string() + " and strides " + t.strides_string() +
                        " but the kernels read packed tensors with channels innermost (strides " +
                        std::to_string(e[1] * e[2] * e[3]) + ", " + std::to_string(e[2] * e[3]) + ", " +
                        std::to_string(e[3]) +
                        ", 1). Make it contiguous in that order (torch: .to(memory_format=torch.channels_last) for "
                        "activations).");
    }
    expected *= std::max<std::int64_t>(e[i], 1);
  }
  if (t.data == nullptr && t.numel() != 0) throw TensorError("Tensor " + name + ": data pointer is null.");
  return e;
}

std::int64_t output_extent(std::int64_t in, std::int64_t filter, int pad, int stride, int dilation) {
  return (in + 2 * pad - dilation * (filter - 1) - 1) / stride + 1;
}

void check_geometry(const Conv2dGeometry& g) {
  for (int i = 0; i < 2; ++i) {
    const char* axis = i == 0 ? "height" : "width";
    if (g.stride[i] < 1) {
      throw ConfigError(std::string("Conv2d stride along the ") + axis + " is " + std::to_string(g.stride[i]) +
                        "; strides must be at least 1.");
    }
    if (g.dilation[i] < 1) {
      throw ConfigError(std::string("Conv2d dilation along the ") + axis + " is " + std::to_string(g.dilation[i]) +
                        "; dilations must be at least 1.");
    }
    if (g.padding[i] < 0) {
      throw ConfigError(std::string("Conv2d padding along the ") + axis + " is " + std::to_string(g.padding[i]) +
                        "; padding must be at least 0.");
    }
  }
}

int fitting_vector(const void* data, std::int64_t channels, DataType type, const std::vector<int>& candidates) {
  const int bytes = bits_of(type) / 8;
  for (int a : candidates) {
    if (channels % a == 0 && reinterpret_cast<std::uintptr_t>(data) % (static_cast<std::uintptr_t>(a) * bytes) == 0) {
      return a;
    }
  }
  return 0;
}

}  // namespace gemmkit::detail
