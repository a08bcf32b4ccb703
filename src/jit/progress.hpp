// src/jit/progress.hpp: how a build that a caller waits for reports itself on stderr (the cache's single-kernel path).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace gemmkit::jit {

// Whether builds report on stderr: the last set_progress() call, else GEMMKIT_PROGRESS.
bool progress_enabled();
// set_progress() with nullopt: GEMMKIT_PROGRESS decides again (tests restore the default with it).
void override_progress(std::optional<bool> enabled);

// The terminal's live line, at most `width` columns (the name shortened from the left to fit):
// "gemmkit: compiling <name> ... 23 s (usually ~45 s)", plus " (+2 more)" while `others` more builds are waited for.
std::string live_progress_line(const std::string& kernel_name, double elapsed_seconds,
                               std::optional<double> usual_seconds, std::size_t others, std::size_t width);

// Reports one build, from construction to destruction: on a terminal a live line refreshed about once a second, then
// "gemmkit: compiled <name> in 41.2 s"; otherwise a line at the start (with the cache key) and that line at the end.
// A destructor run by an exception says the build failed. Make one only where wanted() says so.
class WaitedBuild {
 public:
  // Progress is on and this thread is not a background builder's (a build nobody waits for prints nothing).
  static bool wanted();

  WaitedBuild(std::string kernel_name, const std::string& cache_key, std::optional<double> usual_seconds);
  ~WaitedBuild();
  WaitedBuild(const WaitedBuild&) = delete;
  WaitedBuild& operator=(const WaitedBuild&) = delete;

  const std::string& kernel_name() const { return kernel_name_; }
  std::optional<double> usual_seconds() const { return usual_seconds_; }
  double elapsed_seconds() const;

 private:
  std::string kernel_name_;
  std::optional<double> usual_seconds_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int exceptions_;  // in flight at construction: more at destruction means the build threw
  bool terminal_;
};

}  // namespace gemmkit::jit
