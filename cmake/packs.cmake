# cmake/packs.cmake: kernel packs built with the project, so that an install (C++ or pip) runs its kernels without
# compiling them. GEMMKIT_PACK is a ';'- or ','-separated list of named packs (`gemmkit prebuild --pack`: defaults)
# and pack files (`--pack-file`, one kernel per line); each is built by the gemmkit command, in parallel
# (GEMMKIT_MAX_JOBS), into build/packs/<name> (a cache folder of its own) and installed as
# share/gemmkit/packs/<name> (the Python package: gemmkit/packs/<name>). The library searches the packs beside it
# after the user's cache (DiskCache::pack_roots), and never writes them.
#   cmake -B build -DGEMMKIT_PACK=defaults        GEMMKIT_PACK=defaults pip install .
# A pack is incremental: after a change to gemmkit's device headers, CUTLASS or nvcc the build adds the new kernels
# and leaves the old ones, which nothing finds any more (delete build/packs to drop them).
if(DEFINED ENV{GEMMKIT_PACK})
  set(GEMMKIT_PACK "$ENV{GEMMKIT_PACK}" CACHE STRING "Kernel packs built and installed with gemmkit" FORCE)
endif()
set(GEMMKIT_PACK "" CACHE STRING "Kernel packs built and installed with gemmkit (named packs or pack files)")

string(REPLACE "," ";" gemmkit_packs "${GEMMKIT_PACK}")
foreach(pack IN LISTS gemmkit_packs)
  string(STRIP "${pack}" pack)
  if(pack STREQUAL "")
    continue()
  endif()
  if(pack MATCHES "^[a-z0-9_-]+$" AND NOT EXISTS "${pack}")
    set(what --pack "${pack}")
    set(name "${pack}")
    set(depends "")
  else()
    get_filename_component(file "${pack}" ABSOLUTE)
    if(NOT EXISTS "${file}")
      message(FATAL_ERROR "GEMMKIT_PACK: '${pack}' is neither a named pack (defaults) nor a pack file")
    endif()
    set(what --pack-file "${file}")
    get_filename_component(name "${file}" NAME_WE)
    set(depends "${file}")
  endif()
  set(dir "${CMAKE_BINARY_DIR}/packs/${name}")
  # The stamp follows the CLI, which is relinked whenever the library changes: the pack is then brought up to date
  # (its unchanged kernels are hits).
  add_custom_command(OUTPUT "${CMAKE_BINARY_DIR}/packs/${name}.stamp"
    COMMAND ${CMAKE_COMMAND} -E env GEMMKIT_CACHE_DIR=${dir} GEMMKIT_PACK_PATH= GEMMKIT_TUNING_DB=off
            $<TARGET_FILE:gemmkit_cli> prebuild ${what}
    COMMAND ${CMAKE_COMMAND} -E touch "${CMAKE_BINARY_DIR}/packs/${name}.stamp"
    DEPENDS gemmkit_cli ${depends}
    COMMENT "gemmkit: building the kernel pack ${name} into ${dir}"
    USES_TERMINAL VERBATIM)
  add_custom_target(gemmkit_pack_${name} ALL DEPENDS "${CMAKE_BINARY_DIR}/packs/${name}.stamp")
  # Entries only: the cache's build folders, locks and trash stay behind.
  set(entries_only PATTERN tmp EXCLUDE PATTERN locks EXCLUDE PATTERN trash EXCLUDE PATTERN "*.sqlite3*" EXCLUDE)
  install(DIRECTORY "${dir}/v1" DESTINATION "${GEMMKIT_DATADIR}/packs/${name}" ${entries_only})
  if(GEMMKIT_BUILD_PYTHON)
    install(DIRECTORY "${dir}/v1" DESTINATION "gemmkit/packs/${name}" COMPONENT python EXCLUDE_FROM_ALL
            ${entries_only})
  endif()
endforeach()
