// src/codegen/emit.cpp: KernelSpec -> KernelSource, through the spec's family renderer and template.
#include "gemmkit/codegen.hpp"

#include "families/family.hpp"
#include "codegen/render.hpp"

namespace gemmkit {

KernelSource emit(const KernelSpec& spec) {
  const bool sm90 = spec.family == KernelFamily::Sm90Collective;
  const char* name = sm90 ? codegen::kSm90Template : codegen::kSm80Template;
  const codegen::Placeholders values = sm90 ? codegen::sm90_placeholders(spec) : codegen::sm80_placeholders(spec);
  return KernelSource{spec.name(), spec.arch_flag(), codegen::render(name, codegen::find_template(name), values)};
}

}  // namespace gemmkit
