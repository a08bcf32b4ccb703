// src/families/sm90_visitor.hpp: the Sm90Collective family's rendering of an epilogue visitor tree.
#pragma once

#include "families/family.hpp"
#include "gemmkit/epilogue.hpp"
#include "gemmkit/kernel_spec.hpp"

namespace gemmkit::families {

// templates/sm90_gemm_visitor.cu.in's visitor_nodes (the CUTLASS node types and the Fusion joining them),
// visitor_arguments (statements filling `fusion_args` from `args.visitor`) and visitor_count.
Placeholders sm90_visitor_placeholders(const epilogue::Epilogue& tree);
// The rules an SM90 kernel's tree must keep; throws ConfigError naming the node.
void check_sm90_visitor(const epilogue::Epilogue& tree, const KernelSpec& spec);

}  // namespace gemmkit::families
