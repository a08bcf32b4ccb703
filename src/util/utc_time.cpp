// src/util/utc_time.cpp: see utc_time.hpp.
#include "util/utc_time.hpp"

#include <ctime>

namespace gemmkit {

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace gemmkit
