// src/families/family.hpp: one renderer per kernel family: checks a spec and fills its template's placeholders.
#pragma once

#include "codegen/render.hpp"
#include "gemmkit/kernel_spec.hpp"

namespace gemmkit::codegen {

// templates/sm80_gemm.cu.in: CUTLASS 2.x device::GemmUniversal. Throws ConfigError for what it cannot express.
inline constexpr const char* kSm80Template = "sm80_gemm.cu.in";
Placeholders sm80_placeholders(const KernelSpec& spec);

// templates/sm90_gemm.cu.in: CUTLASS 3.x collective-builder GEMM. Throws ConfigError for what it cannot express.
inline constexpr const char* kSm90Template = "sm90_gemm.cu.in";
Placeholders sm90_placeholders(const KernelSpec& spec);

}  // namespace gemmkit::codegen
