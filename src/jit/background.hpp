// src/jit/background.hpp: kernel builds nobody waits on. run() queues the kernel it would rather use here and keeps
// launching one already built; the build runs on a worker thread and run() picks the kernel up once it is done.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "gemmkit/cache.hpp"

namespace gemmkit::jit {

class BackgroundBuild {
 public:
  enum class State { queued, running, done, failed };
  State state() const { return state_.load(std::memory_order_acquire); }
  bool finished() const { return state() == State::done || state() == State::failed; }
  const std::string& kernel_name() const { return kernel_name_; }
  // Why it failed (once state() is failed).
  const std::string& error() const { return error_; }

 private:
  friend class BackgroundBuilds;
  std::atomic<State> state_{State::queued};
  std::string kernel_name_, error_;
};

// Queues a build of `source` into `cache` with `builder` (the nvcc builder when empty). One build per cache key for
// the life of the process: a second request gets the first one's handle, whatever its state. At most
// max_parallel_compiles() run at once. A failure is printed once to stderr as a warning and kept in the handle.
// At process exit, builds still running are stopped (their nvcc killed, their temp folders removed), not awaited.
std::shared_ptr<const BackgroundBuild> build_in_background(const DiskCache& cache, const Toolchain& toolchain,
                                                           const KernelSource& source,
                                                           const ModuleBuilder& builder = {});

// Blocks until every background build queued so far has finished (done or failed).
void wait_for_background_builds();

}  // namespace gemmkit::jit
