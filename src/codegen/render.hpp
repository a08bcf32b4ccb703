// src/codegen/render.hpp: kernel-source templates (embedded from templates/*.cu.in) and their rendering.
#pragma once

#include <string>
#include <string_view>

#include "families/family.hpp"

namespace gemmkit::codegen {

using families::Placeholders;

// The embedded template named `name` (its file name, e.g. "sm90_gemm.cu.in"); throws gemmkit::Error if absent.
std::string_view find_template(std::string_view name);

// Replaces every {{key}} of `text`. Every placeholder must have a value and every value must be used: a mismatch
// between a template and its renderer is a bug, reported as gemmkit::Error.
std::string render(std::string_view name, std::string_view text, const Placeholders& values);

}  // namespace gemmkit::codegen
