// src/util/notes.hpp: one-time notes on stderr, for choices gemmkit makes on the user's behalf (a fallback kernel).
#pragma once

#include <functional>
#include <string>

namespace gemmkit {

// Prints "gemmkit: note: <message>" to stderr the first time this process sees `message`; later calls are silent.
void note_once(const std::string& message);
// Where notes go instead (the CLI rewrites them in its option spelling); an empty function restores stderr.
void set_note_handler(std::function<void(const std::string&)> handler);

// While one lives, this thread's notes are dropped (and not counted as said): code that declares plans on the user's
// behalf, such as a pack's listing, where a note about a plan's fallback would say nothing the user asked about.
class QuietNotes {
 public:
  QuietNotes();
  ~QuietNotes();
  QuietNotes(const QuietNotes&) = delete;
  QuietNotes& operator=(const QuietNotes&) = delete;
};

}  // namespace gemmkit
