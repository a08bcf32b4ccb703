// src/util/sha256.hpp: a small SHA-256 (FIPS 180-4) for cache keys and file checksums; no OpenSSL.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gemmkit {

class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view bytes);
  Sha256& update(const void* data, std::size_t size);
  // The digest as 64 lowercase hex digits; the object must not be updated afterwards.
  std::string hex_digest();

 private:
  void compress(const std::uint8_t* block);
  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view bytes);
// Hashes a file's contents in chunks; throws gemmkit::Error if it cannot be read.
std::string sha256_file_hex(const std::string& path);

}  // namespace gemmkit
