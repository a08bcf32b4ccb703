// src/util/notes.hpp: one-time notes on stderr, for choices gemmkit makes on the user's behalf (a fallback kernel).
#pragma once

#include <functional>
#include <string>

namespace gemmkit {

// Prints "gemmkit: note: <message>" to stderr the first time this process sees `message`; later calls are silent.
void note_once(const std::string& message);
// Where notes go instead (the CLI rewrites them in its option spelling); an empty function restores stderr.
void set_note_handler(std::function<void(const std::string&)> handler);

}  // namespace gemmkit
