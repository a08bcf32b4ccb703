// src/jit/progress.cpp: compile progress on stderr: one rewritten line on a terminal, plain lines in a log.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "gemmkit/jit.hpp"
#include "jit/background.hpp"

namespace gemmkit {
namespace {

std::string duration_text(double seconds) {
  char text[32];
  const long whole = static_cast<long>(seconds + 0.5);
  if (whole >= 60)
    std::snprintf(text, sizeof text, "%ldm%02lds", whole / 60, whole % 60);
  else
    std::snprintf(text, sizeof text, "%.1fs", seconds);
  return text;
}

// "[3/16] 12.0s elapsed, ETA 1m05s"
std::string counts_text(const BuildProgress& p) {
  std::string text = "[" + std::to_string(p.done) + "/" + std::to_string(p.total) + "] " +
                     duration_text(p.elapsed_seconds) + " elapsed";
  if (p.eta_seconds >= 0 && p.done < p.total) text += ", ETA " + duration_text(p.eta_seconds);
  return text;
}

}  // namespace

ProgressStyle default_progress_style() {
  return ::isatty(STDERR_FILENO) ? ProgressStyle::Bar : ProgressStyle::Lines;
}

ProgressCallback progress_printer(ProgressStyle style) {
  switch (style) {
    case ProgressStyle::Quiet: return {};
    case ProgressStyle::Lines:
      return [](const BuildProgress& p) {
        if (!p.finished) return;
        std::fprintf(stderr, "gemmkit: built %s %s\n", p.kernel_name.c_str(), counts_text(p).c_str());
      };
    case ProgressStyle::Bar: break;
  }
  return [](const BuildProgress& p) {
    constexpr int kWidth = 20;
    const int filled = p.total == 0 ? kWidth : static_cast<int>(kWidth * p.done / p.total);
    std::string bar = "[" + std::string(static_cast<std::size_t>(filled), '#') +
                      std::string(static_cast<std::size_t>(kWidth - filled), '.') + "]";
    std::string name = p.kernel_name;
    constexpr std::size_t kNameWidth = 60;
    if (name.size() > kNameWidth) name = "..." + name.substr(name.size() - kNameWidth + 3);
    // \r and clear-to-end-of-line: one line that each step rewrites; the last one ends it.
    std::fprintf(stderr, "\r\033[K%s %s %s %s", bar.c_str(), counts_text(p).c_str(), p.finished ? "built" : "building",
                 name.c_str());
    if (p.finished && p.done == p.total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

void wait_for_background_compiles() {
  jit::wait_for_background_builds();
}

}  // namespace gemmkit
