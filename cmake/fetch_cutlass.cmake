# cmake/fetch_cutlass.cmake: the CUTLASS 4.2 C++ headers (include/ and tools/util/include of the nvidia-cutlass
# 4.2.0.0 wheel, plus its LICENSE.txt) into DEST, unless DEST already holds them. Used by scripts/setup.sh and by the
# configure step of a build that installs CUTLASS (pip install .) when no tree is at hand:
#   cmake -DDEST=.deps/cutlass [-DPYTHON=python3] -P cmake/fetch_cutlass.cmake
# The wheel comes through `pip download` (honouring pip's configuration: index, proxy, certificates) when PYTHON has
# pip, else straight from PyPI; either way its SHA-256 must match. Only the headers are kept, no Python code.
set(GEMMKIT_CUTLASS_WHEEL_VERSION 4.2.0.0)
set(GEMMKIT_CUTLASS_WHEEL nvidia_cutlass-${GEMMKIT_CUTLASS_WHEEL_VERSION}-py3-none-any.whl)
set(GEMMKIT_CUTLASS_WHEEL_SHA256 f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6)
set(GEMMKIT_CUTLASS_WHEEL_URL
    "https://files.pythonhosted.org/packages/21/6b/e86fc2fd536dd4b8bd2209aa31d7002610c501b0802337787eac9c9b328c/${GEMMKIT_CUTLASS_WHEEL}")

function(gemmkit_fetch_cutlass dest python)
  if(EXISTS "${dest}/.version")
    file(READ "${dest}/.version" have)
    string(STRIP "${have}" have)
    if(have STREQUAL GEMMKIT_CUTLASS_WHEEL_VERSION)
      return()
    endif()
  endif()
  message(STATUS "gemmkit: fetching the CUTLASS ${GEMMKIT_CUTLASS_WHEEL_VERSION} C++ headers into ${dest}")
  set(tmp "${dest}.download")
  file(REMOVE_RECURSE "${tmp}")
  file(MAKE_DIRECTORY "${tmp}")
  set(wheel "${tmp}/${GEMMKIT_CUTLASS_WHEEL}")
  if(python)
    execute_process(COMMAND "${python}" -m pip download -q --no-deps --only-binary=:all: -d "${tmp}"
                            "nvidia-cutlass==${GEMMKIT_CUTLASS_WHEEL_VERSION}"
                    RESULT_VARIABLE pip_result ERROR_VARIABLE pip_error)
    if(NOT pip_result EQUAL 0)
      message(STATUS "gemmkit: pip download failed (${pip_error}); trying ${GEMMKIT_CUTLASS_WHEEL_URL}")
    endif()
  endif()
  if(NOT EXISTS "${wheel}")
    file(DOWNLOAD "${GEMMKIT_CUTLASS_WHEEL_URL}" "${wheel}" STATUS status TLS_VERIFY ON)
    list(GET status 0 code)
    if(NOT code EQUAL 0)
      list(GET status 1 text)
      message(FATAL_ERROR "gemmkit: cannot download ${GEMMKIT_CUTLASS_WHEEL_URL}: ${text}; set CUTLASS_PATH to a "
                          "CUTLASS 4.2 tree (holding include/ and tools/util/include) instead")
    endif()
  endif()
  file(SHA256 "${wheel}" sha)
  if(NOT sha STREQUAL GEMMKIT_CUTLASS_WHEEL_SHA256)
    message(FATAL_ERROR "gemmkit: ${wheel} has SHA-256 ${sha}, expected ${GEMMKIT_CUTLASS_WHEEL_SHA256}")
  endif()
  file(ARCHIVE_EXTRACT INPUT "${wheel}" DESTINATION "${tmp}/x"
       PATTERNS "cutlass_library/source/include/*" "cutlass_library/source/tools/util/include/*" "*/LICENSE.txt")
  file(REMOVE_RECURSE "${dest}.partial")
  file(MAKE_DIRECTORY "${dest}.partial/tools/util")
  file(RENAME "${tmp}/x/cutlass_library/source/include" "${dest}.partial/include")
  file(RENAME "${tmp}/x/cutlass_library/source/tools/util/include" "${dest}.partial/tools/util/include")
  file(RENAME "${tmp}/x/nvidia_cutlass-${GEMMKIT_CUTLASS_WHEEL_VERSION}.dist-info/licenses/LICENSE.txt"
       "${dest}.partial/LICENSE.txt")
  file(WRITE "${dest}.partial/.version" "${GEMMKIT_CUTLASS_WHEEL_VERSION}\n")
  file(REMOVE_RECURSE "${dest}" "${tmp}")
  file(RENAME "${dest}.partial" "${dest}")
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT DEST)
    message(FATAL_ERROR "usage: cmake -DDEST=<folder> [-DPYTHON=python3] -P ${CMAKE_CURRENT_LIST_FILE}")
  endif()
  gemmkit_fetch_cutlass("${DEST}" "${PYTHON}")
endif()
