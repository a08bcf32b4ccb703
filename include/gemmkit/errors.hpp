// include/gemmkit/errors.hpp: the one error hierarchy; every message says what was wrong and what to change.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace gemmkit {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A plan that cannot be built: dtype/layout/opclass/tile/alignment/shared-memory/arch rule.
class ConfigError : public Error {
 public:
  // One option of a plan (GemmOptions' field in the reference's spelling: element_accumulator, element_C,
  // layout_A, ...) and the value to give it.
  struct Setting {
    std::string option, value;
    bool operator==(const Setting&) const = default;
  };
  using Error::Error;
  ConfigError(const std::string& message, std::vector<Setting> nearest) : Error(message), nearest(std::move(nearest)) {}
  // When no kernel exists for the plan's types and layouts: the fewest options to change so that one does, also
  // named in the message. Empty otherwise.
  std::vector<Setting> nearest;
};

// A tensor that does not match the plan: dtype, rank, shape, stride, alignment, device.
class TensorError : public Error {
 public:
  using Error::Error;
};

// nvcc or the CUTLASS headers are missing or too old.
class ToolchainError : public Error {
 public:
  using Error::Error;
};

// nvcc failed on a generated kernel; carries everything needed to reproduce it.
class CompileError : public Error {
 public:
  CompileError(const std::string& message, std::vector<std::string> argv, int exit_code, std::string log,
               std::string source_path)
      : Error(message),
        argv(std::move(argv)),
        exit_code(exit_code),
        log(std::move(log)),
        source_path(std::move(source_path)) {}
  std::vector<std::string> argv;
  int exit_code;
  std::string log;
  std::string source_path;
};

// SIGINT or SIGTERM arrived while nvcc ran: its process group was stopped and its temp folder removed. Not a
// CompileError: nothing is wrong with the kernel. `signal` is the signal's number (a program exits 128 + signal).
class InterruptedError : public Error {
 public:
  InterruptedError(const std::string& message, int signal) : Error(message), signal(signal) {}
  int signal;
};

// A CUDA runtime or driver call failed, or no device is present.
class CudaError : public Error {
 public:
  CudaError(const std::string& message, int code) : Error(message), code(code) {}
  int code;
};

}  // namespace gemmkit
