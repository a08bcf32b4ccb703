// src/codegen/render.cpp: template lookup and {{placeholder}} substitution.
#include "codegen/render.hpp"

#include <algorithm>
#include <cstddef>
#include <set>

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
