// src/selection/kernel_slots.hpp: how run() gets the kernel it wants without waiting on a compile it did not ask for.
// A template over the module type so that the unit tier drives it with fake modules and builders.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "jit/background.hpp"

namespace gemmkit {

// Per configuration (tile) of one alignment triple: the loaded module, a background build, and the configuration
// run while that build runs.
template <class Module>
struct KernelSlots {
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::vector<std::shared_ptr<Module>> modules;                      // set once, never reset
  std::vector<std::shared_ptr<const jit::BackgroundBuild>> pending;  // the wanted kernel's build, off the run path
  std::vector<std::size_t> stand_in;                                 // run instead while pending (kNone: none)

  void resize(std::size_t count) {
    modules.resize(count);
    pending.resize(count);
    stand_in.resize(count, kNone);
  }
};

// Where modules come from, per configuration index.
template <class Module>
struct ModuleSources {
  std::function<std::shared_ptr<Module>(std::size_t)> if_built;  // loaded or in the disk cache, else null; no compile
  std::function<std::shared_ptr<Module>(std::size_t)> build;     // compiled when needed, then loaded (blocks)
  std::function<std::shared_ptr<const jit::BackgroundBuild>(std::size_t)> in_background;
  // A configuration that computes what configuration i does and builds in less time (gemmkit's lean epilogue), or
  // kNone; empty: none anywhere.
  std::function<std::size_t(std::size_t)> quick_twin;
};

// Configuration i's module if loaded, or built (then loaded and kept), else null; nothing compiles.
template <class Module>
Module* loaded_or_built(KernelSlots<Module>& slots, std::mutex& mutex, std::size_t i,
                        const ModuleSources<Module>& sources) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (slots.modules[i]) return slots.modules[i].get();
  }
  std::shared_ptr<Module> module = sources.if_built(i);
  if (!module) return nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!slots.modules[i]) slots.modules[i] = std::move(module);
  return slots.modules[i].get();
}

// The first configuration other than `skip` whose module is loaded or built (then loaded and kept), else kNone.
template <class Module>
std::size_t first_built(KernelSlots<Module>& slots, std::mutex& mutex, std::size_t skip,
                        const ModuleSources<Module>& sources) {
  for (std::size_t i = 0; i < slots.modules.size(); ++i) {
    if (i != skip && loaded_or_built(slots, mutex, i, sources) != nullptr) return i;
  }
  return KernelSlots<Module>::kNone;
}

// The module to launch for configuration `wanted`:
// - loaded, or in the disk cache: that one;
// - else, unless `wait`, a built one (the plan's default first) at once, while `wanted` builds in the background; once
//   that build is done, `wanted` (a cache hit); if it failed (a warning said so), the stand-in from then on;
// - else, nothing built at all: with `wait`, or where `wanted` has no quick twin, `wanted`, compiled here (a compile
//   the caller asked for); else its quick twin, compiled here and run while `wanted` builds in the background.
// `mutex` guards `slots`; no build runs under it.
template <class Module>
Module& module_for_run(KernelSlots<Module>& slots, std::mutex& mutex, std::size_t wanted, bool wait,
                       const ModuleSources<Module>& sources) {
  using State = jit::BackgroundBuild::State;
  auto keep = [&](std::size_t i, std::shared_ptr<Module> module) -> Module& {
    std::lock_guard<std::mutex> lock(mutex);
    if (!slots.modules[i]) slots.modules[i] = std::move(module);
    return *slots.modules[i];
  };
  std::shared_ptr<const jit::BackgroundBuild> pending;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (slots.modules[wanted]) return *slots.modules[wanted];
    pending = slots.pending[wanted];
    if (pending && !wait) {
      const std::size_t stand_in = slots.stand_in[wanted];
      if (!pending->finished()) return *slots.modules[stand_in];
      if (pending->state() == State::failed) return *(slots.modules[wanted] = slots.modules[stand_in]);
    }
  }
  if (pending && pending->state() == State::done) return keep(wanted, sources.build(wanted));  // a cache hit now
  if (wait) return keep(wanted, sources.build(wanted));
  if (Module* module = loaded_or_built(slots, mutex, wanted, sources)) return *module;
  std::size_t i = first_built(slots, mutex, wanted, sources);
  if (i == KernelSlots<Module>::kNone) {  // nothing built: compile, as asked (the quicker twin where there is one)
    i = sources.quick_twin ? sources.quick_twin(wanted) : KernelSlots<Module>::kNone;
    if (i == KernelSlots<Module>::kNone) return keep(wanted, sources.build(wanted));
    keep(i, sources.build(i));
  }
  auto build = sources.in_background(wanted);
  std::lock_guard<std::mutex> lock(mutex);
  if (slots.modules[wanted]) return *slots.modules[wanted];  // another thread got it meanwhile
  slots.stand_in[wanted] = i;
  slots.pending[wanted] = std::move(build);
  return *slots.modules[i];
}

// A module for `wanted` if loaded or built, else for another configuration (the plan's default first), else null;
// nothing compiles and nothing is scheduled: what runs while a kernel of another list of choices builds.
template <class Module>
Module* built_module(KernelSlots<Module>& slots, std::mutex& mutex, std::size_t wanted,
                     const ModuleSources<Module>& sources) {
  if (Module* module = loaded_or_built(slots, mutex, wanted, sources)) return module;
  const std::size_t i = first_built(slots, mutex, wanted, sources);
  if (i == KernelSlots<Module>::kNone) return nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  return slots.modules[i].get();
}

}  // namespace gemmkit
