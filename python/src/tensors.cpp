// python/src/tensors.cpp: Python arrays -> TensorView without copies. torch tensors through their attributes (the
// cheap run path), then DLPack (nb::ndarray: cupy, jax, numpy) or the buffer protocol, then
// __cuda_array_interface__ (numba, older cupy). Strides stay in
// elements as the producer gave them; the C++ plan decides what layout they are and what it accepts.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "gemmkit/device.hpp"
#include "gemmkit/errors.hpp"

namespace gemmkit::python {
namespace {

std::string describe(const char* name) {
  return std::string("Tensor ") + name;
}

void check_rank(std::size_t rank, const char* name) {
  if (rank < 1 || rank > static_cast<std::size_t>(kMaxRank)) {
    throw TensorError(describe(name) + " has rank " + std::to_string(rank) + "; gemmkit takes rank 1 to " +
                      std::to_string(kMaxRank) + " (a matrix, or a batch of matrices).");
  }
}

// DLPack 1.1's codes of the FP8 types gemmkit takes (nanobind's dtype_code does not name them).
constexpr std::uint8_t kDLFloat8_e4m3fn = 10;
constexpr std::uint8_t kDLFloat8_e5m2 = 12;

DataType data_type_of(nb::dlpack::dtype t, const char* name) {
  using nb::dlpack::dtype_code;
  const auto code = static_cast<dtype_code>(t.code);
  if (t.lanes == 1) {
    if (code == dtype_code::Float && t.bits == 16) return DataType::f16;
    if (code == dtype_code::Float && t.bits == 32) return DataType::f32;
    if (code == dtype_code::Float && t.bits == 64) return DataType::f64;
    if (code == dtype_code::Bfloat && t.bits == 16) return DataType::bf16;
    if (code == dtype_code::Int && t.bits == 8) return DataType::s8;
    if (code == dtype_code::Int && t.bits == 32) return DataType::s32;
    if (code == dtype_code::UInt && t.bits == 8) return DataType::u8;
    if (t.code == kDLFloat8_e4m3fn && t.bits == 8) return DataType::e4m3;
    if (t.code == kDLFloat8_e5m2 && t.bits == 8) return DataType::e5m2;
  }
  throw TensorError(
      describe(name) + " has an element type gemmkit does not take (DLPack code " + std::to_string(t.code) + ", " +
      std::to_string(t.bits) + " bits, " + std::to_string(t.lanes) +
      " lanes); use float16, bfloat16, float32, float64, int8, uint8, int32, float8_e4m3fn or float8_e5m2.");
}

template <typename Array>
int device_of(const Array& a, const char* name) {
  const int type = a.device_type();
  if (type == nb::device::cpu::value || type == nb::device::cuda_host::value) return -1;
  if (type == nb::device::cuda::value || type == nb::device::cuda_managed::value) return a.device_id();
  throw TensorError(describe(name) + " lives on a DLPack device of type " + std::to_string(type) +
                    "; gemmkit takes host memory and CUDA device memory.");
}

template <typename Array>
TensorView view_of(const Array& a, const char* name) {
  check_rank(a.ndim(), name);
  TensorView v;
  v.data = const_cast<void*>(static_cast<const void*>(a.data()));
  v.dtype = data_type_of(a.dtype(), name);
  v.rank = static_cast<int>(a.ndim());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = static_cast<std::int64_t>(a.shape(i));
    v.strides[i] = a.stride(i);
  }
  v.device = device_of(a, name);
  return v;
}

// __cuda_array_interface__ (version 2 or 3): typestr like "<f2", strides in bytes or None (C order).
PyTensor from_cuda_array_interface(nb::handle obj, const char* name) {
  const nb::dict cai = nb::cast<nb::dict>(obj.attr("__cuda_array_interface__"));
  const std::string typestr = nb::cast<std::string>(cai["typestr"]);
  const nb::tuple shape = nb::cast<nb::tuple>(cai["shape"]);
  check_rank(shape.size(), name);
  const char kind = typestr.size() >= 3 ? typestr[1] : '?';
  const int bytes = typestr.size() >= 3 ? std::stoi(typestr.substr(2)) : 0;
  nb::dlpack::dtype dt{};
  dt.code = static_cast<std::uint8_t>(kind == 'f'   ? nb::dlpack::dtype_code::Float
                                      : kind == 'i' ? nb::dlpack::dtype_code::Int
                                      : kind == 'u' ? nb::dlpack::dtype_code::UInt
                                                    : nb::dlpack::dtype_code::Complex);
  dt.bits = static_cast<std::uint8_t>(bytes * 8);
  dt.lanes = 1;
  TensorView v;
  v.dtype = data_type_of(dt, name);
  v.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(nb::cast<nb::tuple>(cai["data"])[0]));
  v.rank = static_cast<int>(shape.size());
  for (int i = 0; i < v.rank; ++i) v.shape[i] = nb::cast<std::int64_t>(shape[i]);
  nb::object strides = cai.contains("strides") ? nb::borrow(cai["strides"]) : nb::none();
  std::int64_t packed = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    if (strides.is_none()) {
      v.strides[i] = packed;
      packed *= v.shape[i];
      continue;
    }
    const auto byte_stride = nb::cast<std::int64_t>(nb::cast<nb::tuple>(strides)[i]);
    if (byte_stride % bytes != 0) {
      throw TensorError(describe(name) + " has a stride of " + std::to_string(byte_stride) +
                        " bytes, not a whole number of " + std::to_string(bytes) + "-byte elements.");
    }
    v.strides[i] = byte_stride / bytes;
  }
  // The interface promises memory of the current device.
  v.device = current_device();
  return {v, {}, nb::borrow(obj)};
}

// torch's tensor type and dtypes, looked up once torch has been imported (gemmkit never imports it).
struct TorchTypes {
  PyTypeObject* tensor = nullptr;
  std::vector<std::pair<PyObject*, DataType>> dtypes;
  PyObject* current_raw_stream = nullptr;  // torch._C._cuda_getCurrentRawStream(device) -> int, if torch has it
};

const TorchTypes* torch_types() {
  static TorchTypes* types = nullptr;
  if (types != nullptr) return types;
  PyObject* torch = PyImport_GetModule(nb::str("torch").ptr());
  if (torch == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  nb::object module = nb::steal(torch);
  auto* found = new TorchTypes();  // kept for the life of the process, like torch's own objects
  found->tensor = reinterpret_cast<PyTypeObject*>(module.attr("Tensor").inc_ref().ptr());
  const std::pair<const char*, DataType> names[] = {
      {"float16", DataType::f16}, {"bfloat16", DataType::bf16}, {"float32", DataType::f32}, {"float64", DataType::f64},
      {"int8", DataType::s8},     {"uint8", DataType::u8},      {"int32", DataType::s32}};
  for (const auto& [name, type] : names) found->dtypes.emplace_back(module.attr(name).inc_ref().ptr(), type);
  // FP8 dtypes exist from torch 2.1 on.
  for (const auto& [name, type] : {std::pair{"float8_e4m3fn", DataType::e4m3}, {"float8_e5m2", DataType::e5m2}}) {
    if (nb::hasattr(module, name)) found->dtypes.emplace_back(module.attr(name).inc_ref().ptr(), type);
  }
  const nb::object c_module = module.attr("_C");
  if (nb::hasattr(c_module, "_cuda_getCurrentRawStream")) {
    found->current_raw_stream = c_module.attr("_cuda_getCurrentRawStream").inc_ref().ptr();
  }
  types = found;
  return types;
}

// A torch tensor read through its attributes: several times cheaper than a DLPack export, which for a CUDA tensor
// also orders streams with an event. nullopt for anything that is not a torch tensor.
std::optional<PyTensor> from_torch(nb::handle obj, const char* name) {
  const TorchTypes* torch = torch_types();
  if (torch == nullptr || !PyObject_TypeCheck(obj.ptr(), torch->tensor)) return std::nullopt;
  const bool cuda = nb::cast<bool>(obj.attr("is_cuda"));
  if (!cuda && !nb::cast<bool>(obj.attr("is_cpu"))) {
    const nb::object device = obj.attr("device");
    throw TensorError(describe(name) + " lives on torch device '" + nb::cast<std::string>(nb::str(device)) +
                      "'; gemmkit takes host memory and CUDA device memory.");
  }
  const nb::object dtype = obj.attr("dtype");
  TensorView v;
  bool known = false;
  for (const auto& [object, type] : torch->dtypes) {
    if (dtype.ptr() == object) {
      v.dtype = type;
      known = true;
    }
  }
  if (!known) {
    throw TensorError(describe(name) + " has element type " + nb::cast<std::string>(nb::str(dtype)) +
                      ", which gemmkit does not take; use float16, bfloat16, float32, float64, int8, uint8, int32, "
                      "float8_e4m3fn or float8_e5m2.");
  }
  const nb::tuple shape = nb::tuple(obj.attr("shape"));
  const nb::tuple strides = nb::tuple(obj.attr("stride")());
  check_rank(shape.size(), name);
  v.rank = static_cast<int>(shape.size());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = nb::cast<std::int64_t>(shape[i]);
    v.strides[i] = nb::cast<std::int64_t>(strides[i]);
  }
  v.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(obj.attr("data_ptr")()));
  v.device = cuda ? nb::cast<int>(obj.attr("get_device")()) : -1;
  return PyTensor{v, {}, nb::borrow(obj)};
}

// torch refuses to export tensors that require grad; their detached alias is the same memory.
nb::object detached(nb::handle obj) {
  if (nb::hasattr(obj, "requires_grad") && nb::hasattr(obj, "detach") && nb::cast<bool>(obj.attr("requires_grad"))) {
    return obj.attr("detach")();
  }
  return nb::object();
}

// A shape or strides as the tuple Python expects.
nb::typed<nb::tuple, std::int64_t, nb::ellipsis> extents(const std::array<std::int64_t, kMaxRank>& values, int rank) {
  nb::list out;
  for (int i = 0; i < rank; ++i) out.append(values[i]);
  return nb::typed<nb::tuple, std::int64_t, nb::ellipsis>(nb::tuple(out));
}

}  // namespace

PyTensor to_tensor(nb::handle obj, const char* name, bool writable) {
  if (!obj.is_valid() || obj.is_none()) throw TensorError(describe(name) + " must be set.");
  if (auto tensor = from_torch(obj, name)) return std::move(*tensor);
  nb::ndarray<nb::ro> read_only;
  if (writable) {
    nb::ndarray<> array;
    if (nb::try_cast(obj, array, false)) return {view_of(array, name), nb::ndarray<nb::ro>(array), {}};
  } else if (nb::try_cast(obj, read_only, false)) {
    return {view_of(read_only, name), std::move(read_only), {}};
  }
  if (nb::hasattr(obj, "__cuda_array_interface__")) return from_cuda_array_interface(obj, name);
  if (nb::object alias = detached(obj); alias.is_valid()) {
    PyTensor t = to_tensor(alias, name, writable);
    t.owner = alias;
    return t;
  }
  if (writable && nb::try_cast(obj, read_only, false)) {
    throw TensorError(describe(name) + " is read-only; D receives the result, so pass a writable array.");
  }
  throw nb::type_error((describe(name) + ": cannot read a tensor from an object of type " +
                        nb::cast<std::string>(nb::str(obj.type().attr("__name__"))) +
                        "; pass a numpy array or a DLPack / __cuda_array_interface__ tensor (torch, cupy, jax).")
                           .c_str());
}

std::optional<PyTensor> to_optional_tensor(nb::handle obj, const char* name, bool writable) {
  if (!obj.is_valid() || obj.is_none()) return std::nullopt;
  return to_tensor(obj, name, writable);
}

std::optional<PyTensor> to_conv_tensor(nb::handle obj, const char* name, bool writable) {
  if (!obj.is_valid() || obj.is_none()) return std::nullopt;
  std::optional<PyTensor> tensor = from_torch(obj, name);
  if (!tensor) return to_tensor(obj, name, writable);
  TensorView& v = tensor->view;
  if (v.rank != 4) {
    throw TensorError(describe(name) + ": a conv operand is 4-D (N, C, H, W); got shape " + v.shape_string() + ".");
  }
  // (N, C, H, W) -> (N, H, W, C): channels_last memory is then packed, extents of 1 aside (as torch sees it).
  const std::array<int, 4> order{0, 2, 3, 1};
  const TensorView nchw = v;
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = nchw.shape[order[i]];
    v.strides[i] = nchw.strides[order[i]];
  }
  std::int64_t packed = 1;
  for (int i = 3; i >= 0; --i) {
    if (v.shape[i] == 1) continue;
    if (v.strides[i] != packed) {
      throw TensorError(describe(name) + " with shape " + nchw.shape_string() + " and strides " +
                        nchw.strides_string() +
                        " is not in channels_last memory; the conv kernels read NHWC in place. Call "
                        ".to(memory_format=torch.channels_last) on it first (or allocate it so: torch.empty(..., "
                        "memory_format=torch.channels_last)).");
    }
    packed *= v.shape[i];
  }
  return tensor;
}

std::uintptr_t framework_stream(nb::handle tensor, int device) {
  if (device < 0) return 0;
  if (const TorchTypes* torch = torch_types(); torch != nullptr && PyObject_TypeCheck(tensor.ptr(), torch->tensor)) {
    if (torch->current_raw_stream != nullptr) {
      return nb::cast<std::uintptr_t>(nb::handle(torch->current_raw_stream)(device));
    }
    const nb::object cuda = nb::module_::import_("torch.cuda");
    return nb::cast<std::uintptr_t>(cuda.attr("current_stream")(device).attr("cuda_stream"));
  }
  PyObject* cupy = PyImport_GetModule(nb::str("cupy").ptr());
  if (cupy == nullptr) {
    PyErr_Clear();
    return 0;
  }
  const nb::object module = nb::steal(cupy);
  if (!nb::isinstance(tensor, module.attr("ndarray"))) return 0;
  return nb::cast<std::uintptr_t>(module.attr("cuda").attr("get_current_stream")().attr("ptr"));
}

void bind_tensors(nb::module_& m) {
  nb::class_<TensorView>(m, "TensorView",
                         "What gemmkit sees of an array: pointer, dtype, shape, strides (in "
                         "elements) and device (-1 = host). A view; it owns nothing.")
      .def_prop_ro("data", [](const TensorView& t) { return reinterpret_cast<std::uintptr_t>(t.data); })
      .def_ro("dtype", &TensorView::dtype)
      .def_prop_ro("shape", [](const TensorView& t) { return extents(t.shape, t.rank); })
      .def_prop_ro("strides", [](const TensorView& t) { return extents(t.strides, t.rank); })
      .def_ro("device", &TensorView::device)
      .def("__repr__", [](const TensorView& t) {
        return "TensorView(dtype=" + std::string(to_string(t.dtype)) + ", shape=" + t.shape_string() +
               ", strides=" + t.strides_string() + ", device=" + std::to_string(t.device) + ")";
      });
  m.def(
      "default_stream",
      [](nb::handle tensor) { return framework_stream(tensor, to_tensor(tensor, "X", false).view.device); },
      nb::arg("tensor"),
      "The stream run() uses for `tensor` when none is given: torch's or cupy's current stream of its device; 0 (the "
      "default stream) for other arrays and host memory.");
  m.def(
      "tensor_view", [](nb::handle obj) { return to_tensor(obj, "X", false).view; }, nb::arg("tensor"),
      "How gemmkit reads `tensor` (no copy): dtype, shape, strides in elements, device. Raises TensorError or "
      "TypeError as run() would.");
}

}  // namespace gemmkit::python
