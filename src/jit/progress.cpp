// src/jit/progress.cpp: compile progress on stderr: one rewritten line on a terminal, plain lines in a log.
#include "jit/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gemmkit/jit.hpp"
#include "jit/background.hpp"
#include "jit/process.hpp"
#include "util/knobs.hpp"

namespace gemmkit {
namespace {

std::atomic<int> g_progress{-1};  // set_progress(): 0 or 1; -1: GEMMKIT_PROGRESS decides

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

void set_progress(bool enabled) {
  jit::override_progress(enabled);
}

ProgressStyle default_progress_style() {
  if (!jit::progress_enabled()) return ProgressStyle::Quiet;
  return ::isatty(STDERR_FILENO) ? ProgressStyle::Bar : ProgressStyle::Lines;
}

ProgressCallback progress_printer(ProgressStyle style) {
  if (!jit::progress_enabled()) return {};
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

namespace jit {
namespace {

// "41.2 s", or with no decimals "41 s".
std::string seconds_text(double seconds, int decimals) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f s", decimals, seconds);
  return text;
}

std::size_t terminal_width() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

// The builds callers wait for now, shown on one terminal line (the newest, and how many others) that a ticker thread
// rewrites about once a second while any is running.
class LiveLine {
 public:
  static LiveLine& instance() {
    static LiveLine* line = new LiveLine();  // never destroyed: its detached ticker may outlive static destruction
    return *line;
  }

  void add(const WaitedBuild* build) {
    std::lock_guard<std::mutex> lock(mutex_);
    active_.push_back(build);
    draw();
    if (ticking_) return;
    ticking_ = true;
    std::thread([this] { tick(); }).detach();
  }

  void remove(const WaitedBuild* build, const std::string& final_line) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase(active_, build);
    std::fprintf(stderr, "\r\033[K%s\n", final_line.c_str());
    if (!active_.empty()) draw();
    std::fflush(stderr);
    changed_.notify_all();
  }

 private:
  LiveLine() = default;

  // Called with mutex_ held.
  void draw() {
    const WaitedBuild& newest = *active_.back();
    const std::string line = live_progress_line(newest.kernel_name(), newest.elapsed_seconds(), newest.usual_seconds(),
                                                active_.size() - 1, terminal_width());
    // \r and clear-to-end-of-line: the line that each refresh rewrites.
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
  }

  void tick() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!active_.empty()) {
      changed_.wait_for(lock, std::chrono::seconds(1));
      if (!active_.empty()) draw();
    }
    ticking_ = false;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<const WaitedBuild*> active_;
  bool ticking_ = false;
};

}  // namespace

void override_progress(std::optional<bool> enabled) {
  g_progress = enabled ? (*enabled ? 1 : 0) : -1;
}

bool progress_enabled() {
  const int set = g_progress.load();
  return set >= 0 ? set == 1 : knobs::flag("GEMMKIT_PROGRESS");
}

std::string live_progress_line(const std::string& kernel_name, double elapsed_seconds,
                               std::optional<double> usual_seconds, std::size_t others, std::size_t width) {
  const std::string head = "gemmkit: compiling ";
  std::string tail = " ... " + seconds_text(elapsed_seconds, 0);
  if (usual_seconds) tail += " (usually ~" + seconds_text(*usual_seconds, 0) + ")";
  if (others > 0) tail += " (+" + std::to_string(others) + " more)";
  // One column spare: a line that fills the last column wraps on some terminals, and \r then rewrites only its end.
  const std::size_t fixed = head.size() + tail.size() + 1;
  const std::size_t room = width > fixed ? width - fixed : 0;
  std::string name = kernel_name;
  if (name.size() > room) name = room > 3 ? "..." + name.substr(name.size() - (room - 3)) : "";
  return head + name + tail;
}

bool WaitedBuild::wanted() {
  return !is_background_thread() && progress_enabled();
}

WaitedBuild::WaitedBuild(std::string kernel_name, const std::string& cache_key, std::optional<double> usual_seconds)
    : kernel_name_(std::move(kernel_name)),
      usual_seconds_(usual_seconds),
      exceptions_(std::uncaught_exceptions()),
      terminal_(::isatty(STDERR_FILENO) != 0) {
  if (terminal_) {
    LiveLine::instance().add(this);
    return;
  }
  std::string line = "gemmkit: compiling " + kernel_name_ + " (cache key " + cache_key.substr(0, 12) + "...";
  if (usual_seconds_) line += ", usually ~" + seconds_text(*usual_seconds_, 0);
  std::fprintf(stderr, "%s)\n", line.c_str());
  std::fflush(stderr);
}

WaitedBuild::~WaitedBuild() {
  const std::string elapsed = seconds_text(elapsed_seconds(), 1);
  const std::string line = std::uncaught_exceptions() > exceptions_
                               ? "gemmkit: compiling " + kernel_name_ + " failed after " + elapsed
                               : "gemmkit: compiled " + kernel_name_ + " in " + elapsed;
  if (terminal_) {
    LiveLine::instance().remove(this, line);
    return;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

double WaitedBuild::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace jit
}  // namespace gemmkit
