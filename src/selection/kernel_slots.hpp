// src/selection/kernel_slots.hpp: how run() gets the kernel it wants without waiting on a compile it did not ask for.
// A template over the module type so that the unit tier drives it with fake modules and builders.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <utility>
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
  // A slow stand-in's replacement: the wanted kernel's quick twin, building beside it, run once built (kNone: none).
  std::vector<std::size_t> interim;
  std::vector<std::shared_ptr<const jit::BackgroundBuild>> interim_build;
  std::vector<char> weighed;  // built_module has chosen what to lend (and whether a twin builds) for this one

  void resize(std::size_t count) {
    modules.resize(count);
    pending.resize(count);
    stand_in.resize(count, kNone);
    interim.resize(count, kNone);
    interim_build.resize(count);
    weighed.resize(count, 0);
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
  // Configuration i's estimated time on the problem at hand (catalog::estimated_time); empty: unknown.
  std::function<double(std::size_t)> expected_time;
};

// A stand-in expected to take more than this many times the wanted kernel's time is replaced by the wanted kernel's
// quick twin as soon as that is built (it compiles in about half the time, and runs at about the wanted one's speed).
inline constexpr double kSlowStandIn = 2.0;

// Whether stand-in i is expected kSlowStandIn times slower than `wanted` on the problem, so that `wanted`'s quick
// twin (kNone: none) should build beside it.
template <class Module>
bool wants_twin(const ModuleSources<Module>& sources, std::size_t i, std::size_t wanted, std::size_t twin) {
  return twin != KernelSlots<Module>::kNone && twin != i && sources.expected_time &&
         sources.expected_time(i) > kSlowStandIn * sources.expected_time(wanted);
}

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

// At most this many configurations that are not loaded are looked up in the disk cache when a stand-in is weighed
// (each lookup renders the kernel and hashes it: about 0.3 ms).
inline constexpr std::size_t kStandInLookups = 8;

// The configuration other than `skip` to stand in, loaded and kept: where the sources weigh configurations, the one
// of least expected time among those loaded (no I/O) and the kStandInLookups fastest expected to beat it that the
// disk cache holds (the plan's default first among equals); else, or when none of those is built, the first loaded or
// built, the plan's default first. kNone when none is.
template <class Module>
std::size_t fastest_built(KernelSlots<Module>& slots, std::mutex& mutex, std::size_t skip,
                          const ModuleSources<Module>& sources) {
  if (!sources.expected_time) return first_built(slots, mutex, skip, sources);
  std::vector<std::pair<double, std::size_t>> order;
  for (std::size_t i = 0; i < slots.modules.size(); ++i) {
    if (i != skip) order.emplace_back(sources.expected_time(i), i);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::size_t> to_look_up;
  std::size_t best_loaded = KernelSlots<Module>::kNone;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [time, i] : order) {
      if (slots.modules[i]) {
        best_loaded = i;
        break;
      }
      if (to_look_up.size() < kStandInLookups) to_look_up.push_back(i);
    }
  }
  for (const std::size_t i : to_look_up) {
    if (loaded_or_built(slots, mutex, i, sources) != nullptr) return i;
  }
  return best_loaded != KernelSlots<Module>::kNone ? best_loaded : first_built(slots, mutex, skip, sources);
}

// The module to launch for configuration `wanted`:
// - loaded, or in the disk cache: that one;
// - else, unless `wait`, a built one at once while `wanted` builds in the background: its quick twin if built, else
//   fastest_built's; once that build is done, `wanted` (a cache hit); if it failed (a warning said so), the
//   stand-in from then on. A stand-in expected to be kSlowStandIn times slower than `wanted` on this problem has the
//   quick twin build beside `wanted`, and gives way to it when it is built;
// - else, nothing built at all: with `wait`, or where `wanted` has no quick twin, `wanted`, compiled here (a compile
//   the caller asked for); else its quick twin, compiled here and run while `wanted` builds in the background.
// `mutex` guards `slots`; no build runs under it.
// `queued`, when given, says whether this call queued `wanted`'s background build (a new shape class).
template <class Module>
Module& module_for_run(KernelSlots<Module>& slots, std::mutex& mutex, std::size_t wanted, bool wait,
                       const ModuleSources<Module>& sources, bool* queued = nullptr) {
  using State = jit::BackgroundBuild::State;
  constexpr std::size_t kNone = KernelSlots<Module>::kNone;
  auto keep = [&](std::size_t i, std::shared_ptr<Module> module) -> Module& {
    std::lock_guard<std::mutex> lock(mutex);
    if (!slots.modules[i]) slots.modules[i] = std::move(module);
    return *slots.modules[i];
  };
  std::shared_ptr<const jit::BackgroundBuild> pending;
  std::size_t interim_done = kNone;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (slots.modules[wanted]) return *slots.modules[wanted];
    pending = slots.pending[wanted];
    if (pending && !wait && pending->state() != State::done) {
      const std::size_t stand_in = slots.stand_in[wanted];
      const auto& interim = slots.interim_build[wanted];
      if (interim && interim->state() == State::done) {
        interim_done = slots.interim[wanted];  // loaded below, outside the lock
      } else if (pending->state() != State::failed || (interim && !interim->finished())) {
        return *slots.modules[stand_in];  // still building (after a failure: until the twin is done)
      } else {
        return *(slots.modules[wanted] = slots.modules[stand_in]);  // failed (a warning said so): for good
      }
    }
  }
  if (interim_done != kNone) {
    Module& twin = keep(interim_done, sources.build(interim_done));  // a cache hit now
    std::lock_guard<std::mutex> lock(mutex);
    slots.stand_in[wanted] = interim_done;
    slots.interim[wanted] = kNone;
    slots.interim_build[wanted].reset();
    if (pending->state() == State::failed && !slots.modules[wanted])
      slots.modules[wanted] = slots.modules[interim_done];
    return twin;
  }
  if (pending && pending->state() == State::done) return keep(wanted, sources.build(wanted));  // a cache hit now
  if (wait) return keep(wanted, sources.build(wanted));
  if (Module* module = loaded_or_built(slots, mutex, wanted, sources)) return *module;
  const std::size_t twin = sources.quick_twin ? sources.quick_twin(wanted) : kNone;
  std::size_t i = twin != kNone && loaded_or_built(slots, mutex, twin, sources) != nullptr
                      ? twin
                      : fastest_built(slots, mutex, wanted, sources);
  std::shared_ptr<const jit::BackgroundBuild> interim_build;
  if (i == kNone) {  // nothing built: compile, as asked (the quicker twin where there is one)
    if (twin == kNone) return keep(wanted, sources.build(wanted));
    i = twin;
    keep(i, sources.build(i));
  } else if (wants_twin(sources, i, wanted, twin)) {
    interim_build = sources.in_background(twin);
  }
  auto build = sources.in_background(wanted);
  std::lock_guard<std::mutex> lock(mutex);
  if (slots.modules[wanted]) return *slots.modules[wanted];  // another thread got it meanwhile
  if (queued != nullptr) *queued = !slots.pending[wanted];
  slots.stand_in[wanted] = i;
  slots.pending[wanted] = std::move(build);
  if (interim_build) {
    slots.interim[wanted] = twin;
    slots.interim_build[wanted] = std::move(interim_build);
  }
  return *slots.modules[i];
}

// A module for `wanted` if loaded or built, else for another configuration, else null; nothing compiles: what runs
// while a kernel of another list of choices builds. `wanted` itself is not scheduled (it would be dropped once the
// other one is ready). Where the sources weigh configurations, the one lent is fastest_built's, chosen once, and
// when it is expected kSlowStandIn times slower than `wanted`, `wanted`'s quick twin builds in the background and is
// lent once built. Unweighed (a query), the first built is lent and nothing is remembered.
template <class Module>
Module* built_module(KernelSlots<Module>& slots, std::mutex& mutex, std::size_t wanted,
                     const ModuleSources<Module>& sources) {
  using State = jit::BackgroundBuild::State;
  constexpr std::size_t kNone = KernelSlots<Module>::kNone;
  std::size_t twin = kNone, lent = kNone;
  bool weighed = false, twin_ready = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (slots.modules[wanted]) return slots.modules[wanted].get();
    twin = slots.interim[wanted];
    twin_ready = twin != kNone && (!slots.interim_build[wanted] || slots.interim_build[wanted]->state() == State::done);
    weighed = slots.weighed[wanted] != 0;
    if (slots.stand_in[wanted] != kNone && slots.modules[slots.stand_in[wanted]]) lent = slots.stand_in[wanted];
  }
  // Once weighed, no lookup of `wanted` per run: nothing here builds it.
  if (!weighed) {
    if (Module* module = loaded_or_built(slots, mutex, wanted, sources)) return module;
  }
  if (twin_ready) {
    if (Module* module = loaded_or_built(slots, mutex, twin, sources)) return module;
  }
  if (weighed && lent != kNone) {
    std::lock_guard<std::mutex> lock(mutex);
    return slots.modules[lent].get();
  }
  const bool weighs = sources.expected_time && sources.quick_twin && sources.in_background;
  if (!weighs) {
    const std::size_t i = first_built(slots, mutex, wanted, sources);
    if (i == kNone) return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    return slots.modules[i].get();
  }
  const std::size_t i = fastest_built(slots, mutex, wanted, sources);
  if (i == kNone) return nullptr;
  twin = sources.quick_twin(wanted);
  std::shared_ptr<const jit::BackgroundBuild> twin_build;
  Module* built_twin = nullptr;
  const bool slow = wants_twin(sources, i, wanted, twin);
  if (slow && !(built_twin = loaded_or_built(slots, mutex, twin, sources))) twin_build = sources.in_background(twin);
  std::lock_guard<std::mutex> lock(mutex);
  slots.weighed[wanted] = 1;  // weighed once: each weighing is cache lookups
  slots.stand_in[wanted] = i;
  if (slow) {
    slots.interim[wanted] = twin;
    slots.interim_build[wanted] = std::move(twin_build);
  }
  return built_twin != nullptr ? built_twin : slots.modules[i].get();
}

}  // namespace gemmkit
