// src/util/knobs.hpp: every environment variable gemmkit reads, in one typed table (name, default, one-line doc);
// the CLI's help and the README's table are checked against it.
#pragma once

#include <string>
#include <vector>

namespace gemmkit::knobs {

struct Knob {
  const char* name;
  const char* default_text;
  const char* doc;
};

const std::vector<Knob>& all();

// The variable's value, or "" when unset. `name` must be in the table (an unknown name is a programming error).
std::string value(const char* name);

// "  NAME  (default: ...)  doc" lines for --help.
std::string help_text();

}  // namespace gemmkit::knobs
