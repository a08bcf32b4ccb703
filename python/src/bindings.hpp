// python/src/bindings.hpp: the pieces of the _gemmkit module, one function per topic (module.cpp calls them).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>

#include "gemmkit/tensor.hpp"

namespace gemmkit::python {

namespace nb = nanobind;

void bind_enums(nb::module_& m);
void bind_errors(nb::module_& m);
void bind_tensors(nb::module_& m);
void bind_plan(nb::module_& m);
void bind_values(nb::module_& m);  // called by bind_plan, before the plans
void bind_functions(nb::module_& m);
void bind_toolchain(nb::module_& m);
void bind_epilogue(nb::module_& m);

// A Python tensor seen as a TensorView; `array` (a DLPack import) and `owner` (a detached torch alias, or a
// __cuda_array_interface__ object) keep what the view points into alive: hold them while the view is used.
struct PyTensor {
  TensorView view;
  nb::ndarray<nb::ro> array;
  nb::object owner;
};

// numpy / torch / cupy / jax arrays: DLPack (or the buffer protocol) first, then __cuda_array_interface__.
// No copies. `writable` is asked for D. Raises TensorError for what a TensorView cannot express and
// TypeError for objects that are no tensor at all.
PyTensor to_tensor(nb::handle obj, const char* name, bool writable);
// The stream a tensor's framework would launch on: torch's or cupy's current stream of `device` (the tensor's, as
// to_tensor read it); 0 for host memory and other arrays.
std::uintptr_t framework_stream(nb::handle tensor, int device);
// The same as to_tensor, where None means "not given".
std::optional<PyTensor> to_optional_tensor(nb::handle obj, const char* name, bool writable);
// A conv operand as the kernels read it (NHWC activations, KRSC filters): a torch tensor is (N, C, H, W) /
// (K, C, R, S) in channels_last memory, viewed as NHWC / KRSC without a torch call; other arrays are taken as NHWC /
// KRSC already. None: not given.
std::optional<PyTensor> to_conv_tensor(nb::handle obj, const char* name, bool writable);

}  // namespace gemmkit::python
