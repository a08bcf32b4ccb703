// src/families/visitor_render.hpp: an epilogue visitor tree as the Sm90Collective and Sm80Universal families render it.
#pragma once

#include "families/family.hpp"
#include "gemmkit/epilogue.hpp"
#include "gemmkit/kernel_spec.hpp"

namespace gemmkit::families {

// templates/sm90_gemm_visitor.cu.in's and sm80_gemm_visitor.cu.in's visitor_nodes (the CUTLASS node types and the
// Fusion joining them), visitor_arguments (statements filling `fusion_args` from `args`) and visitor_count.
Placeholders visitor_placeholders(const epilogue::Epilogue& tree, KernelFamily family);
// The rules a kernel's tree must keep; throws ConfigError naming the node.
void check_visitor(const epilogue::Epilogue& tree, const KernelSpec& spec, const DeviceLimits& limits);

}  // namespace gemmkit::families
