// tests/support/front_door_cases.hpp: seeded random calls of a plan's front door (plan, tensors, alpha/beta, bias)
// for the fuzzers: a valid call first, then mutations that each say which operands they break and whether the call
// must then fail. Shared by the unit-tier fuzzer (spec_for and the host checks of run) and the gpu-tier one (run).
// This header judges how a call ended and aborts a hung run; the cases are front_door_case.hpp, their generator
// front_door_generator.hpp (both included here).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "gemmkit/errors.hpp"
#include "support/front_door_case.hpp"
#include "support/front_door_generator.hpp"

namespace gemmkit::fuzz {

// The operands a gemmkit error message names at its start ("Tensor A: ...", "Tensors A and B: ...").
inline std::vector<std::string> named_operands(const std::string& message) {
  static const std::regex kSubject(R"(^Tensors? (A|B|C|D|bias)(?: and (A|B|C|D|bias))?(?=[ :,.]))");
  std::smatch match;
  if (!std::regex_search(message, match, kSubject)) return {};
  std::vector<std::string> out = {match[1].str()};
  if (match[2].matched) out.push_back(match[2].str());
  return out;
}

// How one call ended.
struct Outcome {
  enum Kind { Result, TensorError, ConfigError, CudaError, Other } kind = Result;
  std::string message;
  std::string kind_name() const {
    static const char* const kNames[] = {"result", "TensorError", "ConfigError", "CudaError", "other exception"};
    return kNames[kind];
  }
};

template <class Call>
Outcome capture(Call&& call) {
  try {
    call();
    return {};
  } catch (const gemmkit::TensorError& e) {
    return {Outcome::TensorError, e.what()};
  } catch (const gemmkit::ConfigError& e) {
    return {Outcome::ConfigError, e.what()};
  } catch (const gemmkit::CudaError& e) {
    return {Outcome::CudaError, e.what()};
  } catch (const std::exception& e) {
    return {Outcome::Other, std::string(typeid(e).name()) + ": " + e.what()};
  } catch (...) {
    return {Outcome::Other, "a non-standard exception"};
  }
}

// Whether the outcome is one the case allows when the checks of `stages` ran: "" if so, else why not. A result is
// allowed unless a mutation must fail; an error must be typed (TensorError or ConfigError), allowed by a mutation,
// and name at its start an operand that a mutation broke (exactly that mutation's operands when it is the only one).
inline std::string judge(const Case& x, const Outcome& outcome, std::initializer_list<Stage> stages) {
  const Verdict verdict = x.verdict(stages);
  if (outcome.kind == Outcome::Result) return verdict == Verdict::Invalid ? "succeeded but must fail" : "";
  if (outcome.kind != Outcome::TensorError && outcome.kind != Outcome::ConfigError) {
    return "ended in " + outcome.kind_name() + ": " + outcome.message;
  }
  if (verdict == Verdict::Valid) return "must succeed but threw " + outcome.kind_name() + ": " + outcome.message;
  const std::vector<std::string> named = named_operands(outcome.message);
  if (named.empty()) return "the error names no operand at its start: " + outcome.message;
  const std::vector<std::string> suspects = x.suspects(stages);
  for (const std::string& name : named) {
    if (std::find(suspects.begin(), suspects.end(), name) == suspects.end()) {
      return "the error names " + name + ", which no mutation broke: " + outcome.message;
    }
  }
  std::vector<const Mutation*> breaking;
  for (const Mutation& mu : x.mutations) {
    if (mu.verdict != Verdict::Valid && std::find(stages.begin(), stages.end(), mu.stage) != stages.end()) {
      breaking.push_back(&mu);
    }
  }
  if (breaking.size() == 1 && breaking[0]->verdict == Verdict::Invalid && breaking[0]->exact &&
      named.size() != breaking[0]->operands.size()) {
    return "the error names " + std::to_string(named.size()) + " operand(s) but '" + breaking[0]->what + "' breaks " +
           std::to_string(breaking[0]->operands.size()) + ": " + outcome.message;
  }
  return "";
}

// Aborts the process, naming the case, when no case has finished for `limit`: a hang fails instead of stalling.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  void beat(std::uint64_t seed) {
    std::lock_guard<std::mutex> lock(mutex_);
    seed_ = seed;
    last_ = std::chrono::steady_clock::now();
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      wake_.wait_for(lock, std::chrono::seconds(1));
      if (!done_ && std::chrono::steady_clock::now() - last_ > limit_) {
        std::fprintf(stderr, "front-door fuzz: case seed %llu has run for over %lld s; aborting\n",
                     static_cast<unsigned long long>(seed_), static_cast<long long>(limit_.count()));
        std::abort();
      }
    }
  }
  std::chrono::seconds limit_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::uint64_t seed_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::thread thread_;
};

}  // namespace gemmkit::fuzz
