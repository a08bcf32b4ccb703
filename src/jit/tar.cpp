// src/jit/tar.cpp: ustar records: a 512-byte header (octal numeric fields, a checksum over the header with its own
// field read as spaces), the data padded to 512 bytes, two zero blocks at the end.
#include "jit/tar.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "gemmkit/errors.hpp"

namespace gemmkit::tar {
namespace {

constexpr std::size_t kBlock = 512;
constexpr std::size_t kNameOffset = 0, kNameSize = 100;
constexpr std::size_t kModeOffset = 100, kSizeOffset = 124, kMtimeOffset = 136, kChecksumOffset = 148;
constexpr std::size_t kTypeOffset = 156, kMagicOffset = 257;

void put_octal(std::string& header, std::size_t offset, std::size_t width, unsigned long long value) {
  char text[32];
  std::snprintf(text, sizeof text, "%0*llo", static_cast<int>(width - 1), value);
  std::memcpy(&header[offset], text, width - 1);  // the last byte stays NUL
}

unsigned long long checksum(const char* header) {
  unsigned long long sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    const bool own_field = i >= kChecksumOffset && i < kChecksumOffset + 8;
    sum += own_field ? ' ' : static_cast<unsigned char>(header[i]);
  }
  return sum;
}

bool parse_octal(const char* field, std::size_t width, unsigned long long& value) {
  value = 0;
  std::size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  bool any = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    value = value * 8 + static_cast<unsigned long long>(field[i] - '0');
    any = true;
  }
  return any && (i == width || field[i] == '\0' || field[i] == ' ');
}

}  // namespace

std::string write(const std::vector<File>& files) {
  std::string out;
  for (const File& file : files) {
    if (file.name.empty() || file.name.size() > kNameSize) {
      throw Error("tar: the name '" + file.name + "' does not fit a ustar header (1 to 100 bytes)");
    }
    std::string header(kBlock, '\0');
    std::memcpy(&header[kNameOffset], file.name.data(), file.name.size());
    put_octal(header, kModeOffset, 8, 0644);
    put_octal(header, 108, 8, 0);  // uid
    put_octal(header, 116, 8, 0);  // gid
    put_octal(header, kSizeOffset, 12, file.data.size());
    put_octal(header, kMtimeOffset, 12, 0);  // reproducible archives
    header[kTypeOffset] = '0';
    std::memcpy(&header[kMagicOffset],
                "ustar\0"
                "00",
                8);
    char sum[8];
    std::snprintf(sum, sizeof sum, "%06llo", checksum(header.data()));
    std::memcpy(&header[kChecksumOffset], sum, 7);  // six digits, NUL, and the space already counted
    header[kChecksumOffset + 7] = ' ';
    out += header;
    out += file.data;
    out.append((kBlock - file.data.size() % kBlock) % kBlock, '\0');
  }
  out.append(2 * kBlock, '\0');
  return out;
}

std::vector<File> read(const std::string& bytes, const std::string& what) {
  std::vector<File> files;
  std::size_t pos = 0;
  while (true) {
    if (pos + kBlock > bytes.size()) throw Error(what + " is truncated: it ends inside a tar header");
    const char* header = bytes.data() + pos;
    if (std::all_of(header, header + kBlock, [](char c) { return c == '\0'; })) return files;  // the end
    unsigned long long stored = 0, size = 0;
    if (!parse_octal(header + kChecksumOffset, 8, stored) || stored != checksum(header)) {
      throw Error(what + " is not a tar archive or is damaged: bad header checksum at byte " + std::to_string(pos));
    }
    if (!parse_octal(header + kSizeOffset, 12, size)) {
      throw Error(what + " is damaged: bad size field at byte " + std::to_string(pos));
    }
    const std::string name(header, strnlen(header, kNameSize));
    const char type = header[kTypeOffset];
    pos += kBlock;
    if (size > bytes.size() - pos) throw Error(what + " is truncated: " + name + " is cut short");
    if (type == '0' || type == '\0') {
      files.push_back({name, bytes.substr(pos, size)});
    } else if (type != '5') {
      throw Error(what + ": " + name + " is not a regular file (tar type '" + std::string(1, type) +
                  "'); gemmkit archives hold files only");
    }
    pos += (size + kBlock - 1) / kBlock * kBlock;
  }
}

}  // namespace gemmkit::tar
