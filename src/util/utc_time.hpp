// src/util/utc_time.hpp: the current time as the cache's manifests and the tuning database record it.
#pragma once

#include <string>

namespace gemmkit {

// Now, in UTC: "2026-12-03T15:04:05Z".
std::string utc_now_iso8601();

}  // namespace gemmkit
