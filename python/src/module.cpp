// python/src/module.cpp: the nanobind module gemmkit._gemmkit (imported by the pure-Python package).
#include "bindings.hpp"
#include "gemmkit/jit.hpp"

NB_MODULE(_gemmkit, m) {
  namespace gp = gemmkit::python;
  m.doc() = "gemmkit's C++ core: plans, kernel specs, tensors and errors (use the `gemmkit` package).";
  m.attr("__version__") = GEMMKIT_VERSION;
  gp::bind_errors(m);
  gp::bind_enums(m);
  gp::bind_tensors(m);
  gp::bind_epilogue(m);
  gp::bind_plan(m);
  gp::bind_toolchain(m);
  m.def("set_build_ahead", &gemmkit::set_build_ahead, nanobind::arg("enabled"),
        "Whether declaring a Gemm plan starts building its default kernel in the background (GEMMKIT_BUILD_AHEAD; "
        "on by default in interactive sessions on a machine with a GPU).");
  m.def("set_progress", &gemmkit::set_progress, nanobind::arg("enabled"),
        "Whether compiles report on stderr (a live line on a terminal, a line at the start and end of each build "
        "otherwise), overriding GEMMKIT_PROGRESS; background builds never print.");
}
