// src/jit/background.cpp: one process-wide queue of background builds and the detached worker threads that drain it.
// The queue is never destroyed (workers may outlive static destruction); an exit handler stops the running builds
// and waits briefly for their workers to let go of the cache.
#include "jit/background.hpp"

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "gemmkit/errors.hpp"
#include "jit/process.hpp"

namespace gemmkit::jit {

class BackgroundBuilds {
 public:
  static BackgroundBuilds& instance() {
    static BackgroundBuilds* builds = [] {
      auto* made = new BackgroundBuilds();  // never destroyed: detached workers may still hold it at exit
      std::atexit([] { instance().stop(); });
      return made;
    }();
    return *builds;
  }

  std::shared_ptr<const BackgroundBuild> submit(const DiskCache& cache, const Toolchain& toolchain,
                                                const KernelSource& source, const ModuleBuilder& builder) {
    // Per cache folder and key: a process that moves GEMMKIT_CACHE_DIR (tests do) builds into the new folder too.
    const std::string key = cache.root() + "\n" + cache.key(toolchain, source);
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = builds_.find(key); it != builds_.end()) return it->second;
    auto build = std::make_shared<BackgroundBuild>();
    build->kernel_name_ = source.kernel_name;
    builds_.emplace(key, build);
    if (stopping_) {
      fail(*build, "the process is exiting");
      return build;
    }
    queue_.push_back({cache, toolchain, source, builder, build});
    ++unfinished_;
    if (workers_ < max_parallel_compiles()) {
      ++workers_;
      std::thread([this] { work(); }).detach();
    }
    return build;
  }

  void wait_all() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return unfinished_ == 0; });
  }

 private:
  struct Job {
    DiskCache cache;
    Toolchain toolchain;
    KernelSource source;
    ModuleBuilder builder;
    std::shared_ptr<BackgroundBuild> build;
  };

  BackgroundBuilds() = default;

  static void fail(BackgroundBuild& build, const std::string& why) {
    build.error_ = why;
    build.state_.store(BackgroundBuild::State::failed, std::memory_order_release);
  }

  void work() {
    set_background_thread(true);
    std::unique_lock<std::mutex> lock(mutex_);
    while (!queue_.empty() && !stopping_) {
      Job job = std::move(queue_.front());
      queue_.pop_front();
      job.build->state_.store(BackgroundBuild::State::running, std::memory_order_release);
      lock.unlock();
      std::string error;
      try {
        if (job.builder)
          job.cache.get_or_build(job.toolchain, job.source, job.builder);
        else
          job.cache.get_or_build(job.toolchain, job.source);
      } catch (const std::exception& e) {
        error = e.what();
      } catch (...) {
        error = "an unknown exception";
      }
      lock.lock();
      if (error.empty()) {
        job.build->state_.store(BackgroundBuild::State::done, std::memory_order_release);
      } else {
        fail(*job.build, error);
        if (!stopping_) {
          std::cerr << "gemmkit: warning: the background compile of kernel " << job.source.kernel_name
                    << " failed; run() keeps using the kernel it has. The error: " << error << std::endl;
        }
      }
      --unfinished_;
      changed_.notify_all();
    }
    --workers_;
    changed_.notify_all();
  }

  // At exit: nothing new starts, queued builds fail, running nvcc processes are killed (InterruptedError removes their
  // temp folders), and the workers get a moment to finish unwinding before static destruction begins.
  void stop() {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    for (Job& job : queue_) {
      fail(*job.build, "the process is exiting");
      --unfinished_;
    }
    queue_.clear();
    if (workers_ == 0) return;
    lock.unlock();
    interrupt_children(SIGTERM, /*wait=*/true);
    lock.lock();
    changed_.wait_for(lock, std::chrono::seconds(2), [this] { return workers_ == 0; });
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::shared_ptr<BackgroundBuild>> builds_;  // by folder and key, for the life of the process
  std::deque<Job> queue_;
  int unfinished_ = 0;  // queued or running
  int workers_ = 0;
  bool stopping_ = false;
};

std::shared_ptr<const BackgroundBuild> build_in_background(const DiskCache& cache, const Toolchain& toolchain,
                                                           const KernelSource& source, const ModuleBuilder& builder) {
  return BackgroundBuilds::instance().submit(cache, toolchain, source, builder);
}

void wait_for_background_builds() {
  BackgroundBuilds::instance().wait_all();
}

}  // namespace gemmkit::jit
