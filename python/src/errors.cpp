// python/src/errors.cpp: gemmkit's C++ errors as Python exceptions with the same messages.
// Error -> Exception; ConfigError, TensorError -> also ValueError; ToolchainError, CompileError (with argv,
// exit_code, log, source_path), CudaError (with code) -> also RuntimeError. InterruptedError -> KeyboardInterrupt
// (SIGINT) or SystemExit(128 + signal).
#include <csignal>
#include <exception>
#include <string>

#include "bindings.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"

namespace gemmkit::python {
namespace {

struct PyErrors {
  PyObject *error, *config, *tensor, *toolchain, *compile, *cuda;
};
PyErrors errors{};  // created once at import; owned by the module (references kept alive by m.attr)

PyObject* new_error(nb::module_& m, const char* name, PyObject* base, PyObject* builtin, const char* doc) {
  nb::object bases =
      builtin != nullptr ? nb::make_tuple(nb::handle(base), nb::handle(builtin)) : nb::make_tuple(nb::handle(base));
  const std::string qualified = std::string("gemmkit.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::steal(type);
  return type;
}

// Raises `type(message)` with extra attributes set on the instance.
template <typename SetAttributes>
void raise_with(PyObject* type, const char* message, SetAttributes&& set) {
  nb::object instance = nb::handle(type)(nb::str(message));
  set(instance);
  PyErr_SetObject(type, instance.ptr());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const CompileError& e) {
    raise_with(errors.compile, e.what(), [&](nb::object& x) {
      nb::list argv;
      for (const auto& a : e.argv) argv.append(nb::str(a.c_str(), a.size()));
      x.attr("argv") = argv;
      x.attr("exit_code") = e.exit_code;
      x.attr("log") = nb::str(e.log.c_str(), e.log.size());
      x.attr("source_path") = nb::str(e.source_path.c_str(), e.source_path.size());
    });
  } catch (const InterruptedError& e) {
    // Ctrl-C reads as Python's own KeyboardInterrupt; SIGTERM as the exit it asks for (nvcc is stopped either way).
    if (e.signal == SIGINT) {
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    } else {
      PyErr_SetObject(PyExc_SystemExit, nb::int_(128 + e.signal).ptr());
    }
  } catch (const CudaError& e) {
    raise_with(errors.cuda, e.what(), [&](nb::object& x) { x.attr("code") = e.code; });
  } catch (const ConfigError& e) {
    PyErr_SetString(errors.config, e.what());
  } catch (const TensorError& e) {
    PyErr_SetString(errors.tensor, e.what());
  } catch (const ToolchainError& e) {
    PyErr_SetString(errors.toolchain, e.what());
  } catch (const Error& e) {
    PyErr_SetString(errors.error, e.what());
  }
}

}  // namespace

void bind_errors(nb::module_& m) {
  errors.error = new_error(m, "Error", PyExc_Exception, nullptr, "Base class of every gemmkit error.");
  errors.config = new_error(m, "ConfigError", errors.error, PyExc_ValueError,
                            "A plan that cannot be built: a dtype/layout/opclass/tile/alignment/shared-memory rule.");
  errors.tensor = new_error(m, "TensorError", errors.error, PyExc_ValueError,
                            "A tensor that does not match the plan: dtype, rank, shape, stride, alignment, device.");
  errors.toolchain = new_error(m, "ToolchainError", errors.error, PyExc_RuntimeError,
                               "nvcc or the CUTLASS headers are missing or too old.");
  errors.compile = new_error(m, "CompileError", errors.error, PyExc_RuntimeError,
                             "nvcc failed on a generated kernel; .argv, .exit_code, .log and .source_path say how.");
  errors.cuda = new_error(m, "CudaError", errors.error, PyExc_RuntimeError,
                          "A CUDA call failed or no device is present; .code is the CUDA error code.");
  nb::register_exception_translator(translate);
}

}  // namespace gemmkit::python
