// src/util/knobs.cpp: the environment table and its lookup.
#include "util/knobs.hpp"

#include <cstdlib>
#include <cstring>

#include "gemmkit/errors.hpp"

namespace gemmkit::knobs {

const std::vector<Knob>& all() {
  static const std::vector<Knob> kKnobs = {
      {"GEMMKIT_CACHE_DIR", "$XDG_CACHE_HOME/gemmkit or ~/.cache/gemmkit", "the kernel cache folder"},
      {"CUTLASS_PATH", ".deps/cutlass of the source tree", "a CUTLASS 4.2 tree holding include/ and tools/util/include"},
      {"CUDA_HOME", "`which nvcc`, then /usr/local/cuda", "the CUDA toolkit (nvcc >= 12.4)"},
      {"NVCC_CCBIN", "g++", "the host compiler nvcc uses (also enters the cache key)"},
      {"GEMMKIT_ROOT", "the source tree", "where device/include (gemmkit's glue headers) lives"},
      {"GEMMKIT_VERBOSE", "off", "1 prints every nvcc command line"},
      {"GEMMKIT_MAX_JOBS", "cores, capped by memory (~4 GB each)", "parallel nvcc processes"},
  };
  return kKnobs;
}

std::string value(const char* name) {
  for (const Knob& k : all()) {
    if (std::strcmp(k.name, name) == 0) {
      const char* v = std::getenv(name);
      return v != nullptr ? v : "";
    }
  }
  throw Error(std::string("internal error: environment variable ") + name + " is not in the knobs table");
}

std::string help_text() {
  std::string out;
  for (const Knob& k : all()) {
    const std::size_t pad = std::strlen(k.name) < 20 ? 20 - std::strlen(k.name) : 1;
    out += "  " + std::string(k.name) + std::string(pad, ' ') + k.doc + " (default: " + k.default_text + ")\n";
  }
  return out;
}

}  // namespace gemmkit::knobs
