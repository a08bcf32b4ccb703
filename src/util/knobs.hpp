// src/util/knobs.hpp: every environment variable gemmkit reads, in one typed table (name, type, default, one-line
// doc); the CLI's help and the README's table are checked against it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gemmkit::knobs {

enum class Type {
  Text,    // a path or a name, used as given
  Flag,    // on when set to anything but "" or "0"
  OptOut,  // on unless set to "0"
  Count,   // a positive integer
};

struct Knob {
  const char* name;
  Type type;
  const char* default_text;
  const char* doc;
};

const std::vector<Knob>& all();

// The variable's value, or "" when unset. `name` must be in the table (an unknown name is a programming error).
std::string value(const char* name);
// A Flag or OptOut knob: whether it is on.
bool flag(const char* name);
// A Count knob: its value when set; throws ConfigError naming the variable when it is not a positive integer.
std::optional<int> count(const char* name);

// "  NAME  doc (default: ...)" lines for --help.
std::string help_text();

}  // namespace gemmkit::knobs
