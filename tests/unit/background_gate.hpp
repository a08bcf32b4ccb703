// tests/unit/background_gate.hpp: fakes for the tests of background builds: a builder held at a gate, sources no
// other test builds, and a wait for one build.
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "gemmkit/cache.hpp"
#include "gemmkit/compiler.hpp"
#include "gemmkit/errors.hpp"
#include "jit/background.hpp"
#include "unit/fake_build.hpp"

namespace gemmkit {

// A builder that waits until the test opens its gate: a build that is "still compiling" for as long as the test likes.
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  ModuleBuilder builder(bool fail = false) {
    return [this, fail](const KernelSource& source, const std::string& work_dir) {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return open_; });
      lock.unlock();
      if (fail) throw CompileError("nvcc failed on purpose", {"nvcc"}, 1, "error: on purpose", work_dir);
      fake_builder()(source, work_dir);
    };
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
};

// A source no other test builds (the background queue keeps one build per key for the life of the process).
inline KernelSource unique_source(const std::string& what) {
  static int counter = 0;
  return fake_source("latency_" + what + "_" + std::to_string(::getpid()) + "_" + std::to_string(++counter));
}

inline void wait_until_finished(const jit::BackgroundBuild& build) {
  for (int i = 0; i < 1000 && !build.finished(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace gemmkit
