// src/util/notes.cpp: one-time notes on stderr.
#include "util/notes.hpp"

#include <iostream>
#include <mutex>
#include <set>

namespace gemmkit {

void note_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (!said.insert(message).second) return;
  std::cerr << "gemmkit: note: " << message << "\n";
}

}  // namespace gemmkit
