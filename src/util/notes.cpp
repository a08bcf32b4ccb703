// src/util/notes.cpp: one-time notes on stderr.
#include "util/notes.hpp"

#include <iostream>
#include <mutex>
#include <set>
#include <utility>

namespace gemmkit {

namespace {

std::mutex mutex;
std::set<std::string> said;
std::function<void(const std::string&)> note_handler;
thread_local int t_quiet = 0;  // QuietNotes scopes open on this thread

}  // namespace

void note_once(const std::string& message) {
  if (t_quiet > 0) return;
  std::lock_guard<std::mutex> lock(mutex);
  if (!said.insert(message).second) return;
  if (note_handler) {
    note_handler(message);
  } else {
    std::cerr << "gemmkit: note: " << message << "\n";
  }
}

QuietNotes::QuietNotes() {
  ++t_quiet;
}

QuietNotes::~QuietNotes() {
  --t_quiet;
}

void set_note_handler(std::function<void(const std::string&)> handler) {
  std::lock_guard<std::mutex> lock(mutex);
  note_handler = std::move(handler);
}

}  // namespace gemmkit
