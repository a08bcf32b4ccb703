// src/codegen/render.cpp: KernelSpec -> KernelSource: the spec's family fills its template's {{placeholders}}.
#include "codegen/render.hpp"

#include <algorithm>
#include <cstddef>
#include <set>

#include "catalog/catalog.hpp"
#include "gemmkit/codegen.hpp"
#include "gemmkit/errors.hpp"

namespace gemmkit::codegen {

extern std::pair<std::string_view, std::string_view> const kTemplates[];
extern std::size_t const kTemplateCount;

std::string_view find_template(std::string_view name) {
  for (std::size_t i = 0; i < kTemplateCount; ++i) {
    if (kTemplates[i].first == name) return kTemplates[i].second;
  }
  throw Error("internal error: kernel template '" + std::string(name) + "' is not embedded in the library");
}

std::string render(std::string_view name, std::string_view text, const Placeholders& values) {
  std::string out;
  out.reserve(text.size() + 1024);
  std::set<std::string_view> used;
  std::size_t pos = 0;
  while (true) {
    const std::size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) break;
    const std::size_t close = text.find("}}", open);
    if (close == std::string_view::npos) {
      throw Error("internal error: unterminated placeholder in template '" + std::string(name) + "'");
    }
    const std::string_view key = text.substr(open + 2, close - open - 2);
    const auto value = std::find_if(values.begin(), values.end(), [&](const auto& kv) { return kv.first == key; });
    if (value == values.end()) {
      throw Error("internal error: template '" + std::string(name) + "' uses {{" + std::string(key) +
                  "}}, which its renderer does not set");
    }
    out.append(text.substr(pos, open - pos));
    out.append(value->second);
    used.insert(value->first);
    pos = close + 2;
  }
  out.append(text.substr(pos));
  for (const auto& [key, value] : values) {
    if (!used.count(key)) {
      throw Error("internal error: template '" + std::string(name) + "' does not use {{" + key + "}}");
    }
  }
  return out;
}

}  // namespace gemmkit::codegen

namespace gemmkit {

KernelSource render(const KernelSpec& spec) {
  const families::Family& family = catalog::family_of(spec.family);
  // The family's own rules are the only ones: codegen asserts the spec passes them and adds none.
  try {
    family.validate(spec, catalog::limits_for_cc(spec.cc));
  } catch (const ConfigError& error) {
    throw ConfigError(spec.name() + ": " + error.what());
  }
  const std::string_view name = family.template_name(spec);
  return KernelSource{spec.name(), spec.arch_flag(),
                      codegen::render(name, codegen::find_template(name), family.placeholders(spec)),
                      family.splittable(spec), std::string(to_string(spec.family))};
}

}  // namespace gemmkit
