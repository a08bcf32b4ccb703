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
  using Error::Error;
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

// A CUDA runtime or driver call failed, or no device is present.
class CudaError : public Error {
 public:
  CudaError(const std::string& message, int code) : Error(message), code(code) {}
  int code;
};

}  // namespace gemmkit
