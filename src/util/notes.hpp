// src/util/notes.hpp: one-time notes on stderr, for choices gemmkit makes on the user's behalf (a fallback kernel).
#pragma once

#include <string>

namespace gemmkit {

// Prints "gemmkit: note: <message>" to stderr the first time this process sees `message`; later calls are silent.
void note_once(const std::string& message);

}  // namespace gemmkit
