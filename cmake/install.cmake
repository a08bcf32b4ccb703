# cmake/install.cmake: the C++ package. `cmake --install build --prefix P` installs
#   P/lib/libgemmkit.so, P/bin/gemmkit (the CLI), P/include/gemmkit/*.hpp,
#   P/lib/cmake/gemmkit/ (gemmkitConfig.cmake, gemmkitConfigVersion.cmake, gemmkitTargets.cmake),
#   P/share/gemmkit/{device/include, templates, cutlass} (what nvcc compiles kernels with; cutlass/ when
#   GEMMKIT_INSTALL_CUTLASS). The library finds share/gemmkit relative to its own folder, so the prefix can move.
# Consumers: find_package(gemmkit 0.1 REQUIRED) and target_link_libraries(app PRIVATE gemmkit::gemmkit).
set(GEMMKIT_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/gemmkit")
set(GEMMKIT_THIRD_PARTY_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/gemmkit/third_party")

set_target_properties(gemmkit PROPERTIES INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}")
# The CLI finds libgemmkit.so in the CMake layout (bin/ and lib/) and in the Python package (gemmkit/bin/, gemmkit/).
set_target_properties(gemmkit_cli PROPERTIES
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR};$ORIGIN/..;${CUDAToolkit_LIBRARY_DIR}")

install(TARGETS gemmkit gemmkit_interface gemmkit_cli EXPORT gemmkitTargets
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
set_target_properties(gemmkit_cli PROPERTIES EXPORT_NAME cli)
set_target_properties(gemmkit_interface PROPERTIES EXPORT_NAME interface)
install(EXPORT gemmkitTargets NAMESPACE gemmkit:: DESTINATION "${GEMMKIT_CMAKEDIR}")
install(DIRECTORY include/gemmkit DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(DIRECTORY device/include DESTINATION "${GEMMKIT_DATADIR}/device")
# For reference: the library embeds these templates, it does not read them.
install(DIRECTORY templates DESTINATION "${GEMMKIT_DATADIR}")
if(GEMMKIT_nlohmann_json_FROM_DEPS)
  install(DIRECTORY "${GEMMKIT_DEPS_INCLUDE}/nlohmann" DESTINATION "${GEMMKIT_THIRD_PARTY_INCLUDEDIR}")
endif()

# The CUTLASS headers, for the C++ install and (component python) the Python package.
function(gemmkit_install_cutlass destination)
  set(tree "${GEMMKIT_CUTLASS_DEFAULT}")
  install(DIRECTORY "${tree}/include" DESTINATION "${destination}" ${ARGN})
  install(DIRECTORY "${tree}/tools/util/include" DESTINATION "${destination}/tools/util" ${ARGN})
  if(EXISTS "${tree}/LICENSE.txt")
    install(FILES "${tree}/LICENSE.txt" DESTINATION "${destination}" ${ARGN})
  endif()
endfunction()
if(GEMMKIT_INSTALL_CUTLASS)
  gemmkit_install_cutlass("${GEMMKIT_DATADIR}/cutlass")
endif()

configure_package_config_file(cmake/gemmkitConfig.cmake.in "${CMAKE_CURRENT_BINARY_DIR}/gemmkitConfig.cmake"
  INSTALL_DESTINATION "${GEMMKIT_CMAKEDIR}" PATH_VARS GEMMKIT_DATADIR GEMMKIT_THIRD_PARTY_INCLUDEDIR)
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/gemmkitConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/gemmkitConfig.cmake" "${CMAKE_CURRENT_BINARY_DIR}/gemmkitConfigVersion.cmake"
        DESTINATION "${GEMMKIT_CMAKEDIR}")
