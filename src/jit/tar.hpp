// src/jit/tar.hpp: the few ustar (POSIX tar) records the kernel cache's export archives need: regular files with
// short relative names, read back with every header checked. `tar tf` lists what write_tar writes.
#pragma once

#include <string>
#include <vector>

namespace gemmkit::tar {

struct File {
  std::string name;  // relative, '/'-separated, at most 100 bytes
  std::string data;
};

// The archive's bytes: one header and the padded data per file, then the two zero blocks that end it.
std::string write(const std::vector<File>& files);

// The regular files of an archive. Throws Error on a bad checksum, a truncated file, or a record that is not a
// regular file or directory; `what` names the archive in the message.
std::vector<File> read(const std::string& bytes, const std::string& what);

}  // namespace gemmkit::tar
