// python/src/toolchain.cpp: what gemmkit.emit needs to write a kernel's build files: the folders gemmkit compiles
// with (CUTLASS, the device headers) and the nvcc command it runs, found without running nvcc.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <utility>

#include "bindings.hpp"
#include "gemmkit/compiler.hpp"

namespace gemmkit::python {

using namespace nb::literals;

namespace {

// The fields as Python string literals; the empty ones (find_headers() runs no nvcc) are left out.
std::string toolchain_repr(const Toolchain& t) {
  const std::pair<const char*, const std::string*> fields[] = {{"nvcc", &t.nvcc},
                                                               {"nvcc_version", &t.nvcc_version},
                                                               {"cuda_home", &t.cuda_home},
                                                               {"cutlass_root", &t.cutlass_root},
                                                               {"cutlass_version", &t.cutlass_version},
                                                               {"device_include_dir", &t.device_include_dir}};
  std::string out = "Toolchain(";
  for (const auto& [name, value] : fields) {
    if (value->empty()) continue;
    out += (out.back() == '(' ? "" : ", ") + std::string(name) + "=" +
           nb::repr(nb::str(value->data(), value->size())).c_str();
  }
  return out + ")";
}

}  // namespace

void bind_toolchain(nb::module_& m) {
  nb::class_<Toolchain>(m, "Toolchain", "The build environment gemmkit compiles kernels with (see find_headers()).")
      .def_ro("nvcc", &Toolchain::nvcc)
      .def_ro("cuda_home", &Toolchain::cuda_home)
      .def_ro("nvcc_version", &Toolchain::nvcc_version)
      .def_ro("cutlass_root", &Toolchain::cutlass_root)
      .def_ro("cutlass_version", &Toolchain::cutlass_version)
      .def_ro("device_include_dir", &Toolchain::device_include_dir)
      .def("__repr__", &toolchain_repr)
      .def_static("find_headers", &Toolchain::find_headers,
                  "CUTLASS and gemmkit's device headers as the compiler finds them (CUTLASS_PATH, GEMMKIT_ROOT, "
                  "else the configured defaults); runs no program, so nvcc and the host compiler stay empty.");
  m.def("nvcc_command", &nvcc_command, "toolchain"_a, "source"_a, "source_path"_a, "output_path"_a,
        "The nvcc command line gemmkit builds `source_path` into the shared object `output_path` with.");
}

}  // namespace gemmkit::python
