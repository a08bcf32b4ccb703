// src/util/knobs.cpp: the environment table and its typed lookup.
#include "util/knobs.hpp"

#include <cstdlib>
#include <cstring>

#include "gemmkit/errors.hpp"

namespace gemmkit::knobs {
namespace {

const Knob& knob(const char* name, Type type, Type or_type) {
  for (const Knob& k : all()) {
    if (std::strcmp(k.name, name) == 0 && (k.type == type || k.type == or_type)) return k;
  }
  throw Error(std::string("internal error: environment variable ") + name +
              " is not in the knobs table with the type it is read as");
}

std::string read(const Knob& k) {
  const char* v = std::getenv(k.name);
  return v != nullptr ? v : "";
}

}  // namespace

const std::vector<Knob>& all() {
  static const std::vector<Knob> kKnobs = {
      {"GEMMKIT_CACHE_DIR", Type::Text, "$XDG_CACHE_HOME/gemmkit or ~/.cache/gemmkit", "the kernel cache folder"},
      {"GEMMKIT_PACK_PATH", Type::Text, "none",
       "more kernel packs: ':'-separated cache folders, read only, searched after the cache and before the packs "
       "installed beside the library"},
      {"CUTLASS_PATH", Type::Text, "the installed copy, else .deps/cutlass",
       "a CUTLASS 4.2 tree holding include/ and tools/util/include"},
      {"CUDA_HOME", Type::Text, "`which nvcc`, then /usr/local/cuda", "the CUDA toolkit (nvcc >= 12.4)"},
      {"NVCC_CCBIN", Type::Text, "g++",
       "the host compiler nvcc uses (its target enters the cache key, not its version)"},
      {"GEMMKIT_ROOT", Type::Text, "the install, else the source tree",
       "where device/include (gemmkit's glue headers) lives"},
      {"GEMMKIT_VERBOSE", Type::Flag, "off", "1 prints every nvcc command line"},
      {"GEMMKIT_MAX_JOBS", Type::Count, "cores, capped by memory (~4 GB each)", "parallel nvcc processes"},
      {"GEMMKIT_KEEP_TEMP", Type::Flag, "off", "1 keeps nvcc's intermediate files (.ptx, .cubin, ...) in the entry"},
      {"GEMMKIT_ALWAYS_COMPILE", Type::Flag, "off",
       "1 builds each kernel once per process instead of taking it from the disk cache"},
      {"GEMMKIT_SPLIT_BUILD", Type::OptOut, "on",
       "0 builds SM90 kernels (GEMM, grouped, Conv2d) as one module in one nvcc pass instead of a cubin plus a small "
       "host module (two nvcc processes at once, the cubin launched through the driver API; ~35 % less wall time with "
       "two jobs free)"},
      {"GEMMKIT_BUILD_AHEAD", Type::Text, "auto",
       "1: declaring a Gemm plan starts building its default kernel in the background (and a new shape class its "
       "neighbours' kernels); 0: never; auto: in interactive Python sessions on a machine with a GPU"},
      {"GEMMKIT_WAIT_FOR_BEST", Type::Flag, "off",
       "1 makes run() compile and wait for the kernel a new shape asks for, instead of compiling it in the background "
       "(and a plan's first run builds its chosen kernel, not the quicker lean twin)"},
      {"GEMMKIT_ACTIVATION_AT_LAUNCH", Type::OptOut, "on",
       "0: an SM90 GEMM plan of 16- or 32-bit operands with a fused activation (or a bias, or scale vectors) builds a "
       "kernel with its activation compiled in, one per activation, instead of one kernel on CUTLASS's epilogue that "
       "takes the activation at launch and serves them all (FP8 plans compile it in unless they ask)"},
      {"GEMMKIT_LEAN_TMA_STORE", Type::Flag, "off",
       "1: SM90 kernels on gemmkit's lean epilogue stage a 16-bit D in shared memory and store it with TMA "
       "(stmatrix, one asynchronous store per chunk) instead of storing it from registers"},
      {"GEMMKIT_MOE_BANDS", Type::OptOut, "on",
       "0: the MoE form (run_contiguous) gives an SM90 kernel one group per expert, instead of cutting tall experts "
       "into bands of rows that keep their A in L2 (read at each launch)"},
      {"GEMMKIT_PROGRESS", Type::OptOut, "on",
       "0 prints nothing while a kernel compiles (else, for each build a caller waits for: a line refreshed every "
       "second "
       "on a terminal, a line at its start and one at its end otherwise)"},
      {"GEMMKIT_DUMP_SASS", Type::Flag, "off", "1 writes kernel.sass (cuobjdump -sass) beside each built kernel.so"},
      {"GEMMKIT_SPLIT_K", Type::Text, "auto",
       "stream-k: run() splits K by itself on the Stream-K kernel only (not with SM90 parallel split-K); off: never "
       "(Stream-K kernels keep CUTLASS's heuristic decomposition)"},
      {"GEMMKIT_TUNING_DB", Type::Text, "<cache>/tuning.sqlite3",
       "the tuning database (gemmkit tune, Gemm::tune); off: run() ignores it"},
  };
  return kKnobs;
}

std::string value(const char* name) {
  for (const Knob& k : all()) {
    if (std::strcmp(k.name, name) == 0) return read(k);
  }
  throw Error(std::string("internal error: environment variable ") + name + " is not in the knobs table");
}

bool flag(const char* name) {
  const Knob& k = knob(name, Type::Flag, Type::OptOut);
  const std::string v = read(k);
  if (v.empty()) return k.type == Type::OptOut;
  return v != "0";
}

std::optional<int> count(const char* name) {
  const Knob& k = knob(name, Type::Count, Type::Count);
  const std::string text = read(k);
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0' || value < 1 || value > 4096) {
    throw ConfigError(std::string(k.name) + "='" + text + "' is not a positive integer; unset it or set it to the " +
                      "number of " + k.doc + ", e.g. 4");
  }
  return static_cast<int>(value);
}

std::string help_text() {
  std::string out;
  for (const Knob& k : all()) {
    const std::size_t pad = std::strlen(k.name) < 24 ? 24 - std::strlen(k.name) : 1;
    out += "  " + std::string(k.name) + std::string(pad, ' ') + k.doc + " (default: " + k.default_text + ")\n";
  }
  return out;
}

}  // namespace gemmkit::knobs
