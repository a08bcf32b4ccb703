// gemmkit/torch_module.h: what every exported binding (<name>.cpp) shares: the kernel's entry points and the
// Python module around the op it registers. Includes Python.h and gemmkit's C headers only, no torch header.
#pragma once

#include <Python.h>  // first, as Python asks

#include <limits>  // a tree constant that is not finite

#include "gemmkit/torch_export.h"

// The kernel's entry points (gemmkit/module_entry.hpp, gemmkit/grouped_entry.hpp, gemmkit/conv2d_entry.hpp), linked
// in: from <name>_kernel.cu (setup.py) or the kernel library of gemmkit's cache (the JIT build). A Gemm module
// defines the dense ones, a grouped module the gk_grouped_* ones, a Conv2d module the gk_conv2d_* ones; a binding
// names only its kind's table below, so the other kinds' symbols are never referenced.
extern "C" {
int gk_abi_version(void);
const char* gk_kernel_name(void);
int gk_last_cuda_error(void);
size_t gk_workspace_size(const gk_gemm_args* args);
int gk_run(const gk_gemm_args* args, void* workspace, void* stream);
const gk_grouped_info* gk_grouped_describe(void);
size_t gk_grouped_metadata_bytes(int32_t groups);
size_t gk_grouped_workspace_size(const gk_grouped_args* args);
int gk_grouped_pack(const gk_grouped_args* args, const gk_grouped_problem* problems, void* host_metadata,
                    size_t metadata_bytes, int32_t* failed_group);
int gk_grouped_run(const gk_grouped_args* args, const void* device_metadata, void* workspace, void* stream);
int gk_conv2d_can_implement(const gk_conv2d_args* args);
size_t gk_conv2d_workspace_size(const gk_conv2d_args* args);
int gk_conv2d_run(const gk_conv2d_args* args, void* workspace, void* stream);
}

namespace gemmkit::torch_module {

// Internal linkage: an inline variable would be a GNU "unique" symbol, which the dynamic linker shares between every
// extension of the process, so that the second exported kernel's op ran the first one's entry points.
static constexpr gk_torch_entry_points kGemmEntryPoints = {gk_abi_version, gk_kernel_name, gk_workspace_size, gk_run,
                                                           gk_last_cuda_error};
static constexpr gk_torch_grouped_entry_points kGroupedEntryPoints = {gk_abi_version,
                                                                      gk_kernel_name,
                                                                      gk_last_cuda_error,
                                                                      gk_grouped_describe,
                                                                      gk_grouped_metadata_bytes,
                                                                      gk_grouped_workspace_size,
                                                                      gk_grouped_pack,
                                                                      gk_grouped_run};
static constexpr gk_torch_conv2d_entry_points kConv2dEntryPoints = {gk_abi_version,           gk_kernel_name,
                                                                    gk_last_cuda_error,       gk_conv2d_can_implement,
                                                                    gk_conv2d_workspace_size, gk_conv2d_run};

// One node of an epilogue visitor tree as an exported binding lists it (gk_torch_visitor_node), one call per node.
namespace visitor {

// The accumulator, C or a compute: nothing at run time.
constexpr gk_torch_visitor_node none() {
  return {GK_TORCH_VISITOR_NONE, nullptr, -1, GK_DTYPE_F32, GK_ROW_MAJOR, 0, 0, -1, 0.0};
}
constexpr gk_torch_visitor_node constant(double value) {
  return {GK_TORCH_VISITOR_CONSTANT, nullptr, -1, GK_DTYPE_F32, GK_ROW_MAJOR, 0, 0, -1, value};
}
constexpr gk_torch_visitor_node scalar(const char* name, int argument) {
  return {GK_TORCH_VISITOR_SCALAR, name, argument, GK_DTYPE_F32, GK_ROW_MAJOR, 0, 0, -1, 0.0};
}
// A tensor the kernel reads: a matrix, a row or a column vector.
constexpr gk_torch_visitor_node input(gk_torch_visitor_kind kind, const char* name, int argument, gk_dtype dtype,
                                      gk_layout layout, int access_bytes) {
  return {kind, name, argument, dtype, layout, access_bytes, 0, -1, 0.0};
}
// An m x n tensor the kernel writes.
constexpr gk_torch_visitor_node store(const char* name, int argument, gk_dtype dtype, gk_layout layout,
                                      int access_bytes) {
  return {GK_TORCH_VISITOR_MATRIX, name, argument, dtype, layout, access_bytes, 1, -1, 0.0};
}
// A row or column vector or a per-batch value the kernel's atomics accumulate into, from `fill` bytes.
constexpr gk_torch_visitor_node reduction(gk_torch_visitor_kind kind, const char* name, int argument, gk_dtype dtype,
                                          int fill) {
  return {kind, name, argument, dtype, GK_ROW_MAJOR, 0, 1, fill, 0.0};
}

}  // namespace visitor

// Registers the op (torch.ops.<ns>.run) and returns the module with `run` (that op: its schema brings keywords
// and defaults) and `kernel_name`; nullptr with a Python ImportError when something does not fit.
inline PyObject* make_module(PyModuleDef* definition, const char* ns, const char* (*register_op)(const char* ns)) {
  if (gk_abi_version() != GK_ABI_VERSION) {
    PyErr_Format(PyExc_ImportError, "kernel %s speaks gemmkit ABI %d, this binding %d; export it again",
                 gk_kernel_name(), gk_abi_version(), GK_ABI_VERSION);
    return nullptr;
  }
  PyObject* torch = PyImport_ImportModule("torch");  // torch's libraries first: the glue's op registry lives there
  if (torch == nullptr) return nullptr;
  if (const char* error = register_op(ns)) {
    Py_DECREF(torch);
    PyErr_Format(PyExc_ImportError, "cannot register torch.ops.%s.run: %s", ns, error);
    return nullptr;
  }
  PyObject* module = PyModule_Create(definition);
  PyObject* ops = module ? PyObject_GetAttrString(torch, "ops") : nullptr;
  PyObject* library = ops ? PyObject_GetAttrString(ops, ns) : nullptr;
  PyObject* run = library ? PyObject_GetAttrString(library, "run") : nullptr;
  const bool ok = run != nullptr && PyModule_AddObjectRef(module, "run", run) == 0 &&
                  PyModule_AddStringConstant(module, "kernel_name", gk_kernel_name()) == 0;
  Py_XDECREF(run);
  Py_XDECREF(library);
  Py_XDECREF(ops);
  Py_DECREF(torch);
  if (ok) return module;
  Py_XDECREF(module);
  return nullptr;
}

}  // namespace gemmkit::torch_module

// One level of indirection, so that TORCH_EXTENSION_NAME (set by torch's build) is expanded before use.
#define GK_STRINGIFY_(x) #x
#define GK_STRINGIFY(x) GK_STRINGIFY_(x)
#define GK_CONCAT_(a, b) a##b
#define GK_CONCAT(a, b) GK_CONCAT_(a, b)
// PyInit_<name>, which torch's JIT loader and `import <name>` call: registers the op under the namespace <name>.
#define GK_PYTHON_MODULE(name, register_op, doc)                                                          \
  PyMODINIT_FUNC GK_CONCAT(PyInit_, name)(void) {                                                         \
    static PyModuleDef definition = {                                                                     \
        PyModuleDef_HEAD_INIT, GK_STRINGIFY(name), doc, -1, nullptr, nullptr, nullptr, nullptr, nullptr}; \
    return gemmkit::torch_module::make_module(&definition, GK_STRINGIFY(name), register_op);              \
  }
