# cmake/JitbridgeInstall.cmake — install rules of the C++ package: headers, libjitbridge_core.a, lib/cmake/jitbridge.
# Included by the top-level CMakeLists.txt when JITBRIDGE_INSTALL is on (not in pip builds). C++ users then write
#   find_package(jitbridge REQUIRED)  target_link_libraries(app PRIVATE jitbridge::jitbridge)
# with CMAKE_PREFIX_PATH pointing at the install prefix.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(JITBRIDGE_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/jitbridge")

# Public headers: every layer's include/jitbridge (device headers such as tensor.cuh included), plus dlpack.h,
# which they include. fmt, xxhash and nlohmann/json are private to the library and not installed.
foreach(_layer cuda jit launch interop)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/${_layer}/include/jitbridge" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
endforeach()
install(FILES "${JITBRIDGE_DLPACK_INCLUDE}/dlpack/dlpack.h"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/jitbridge/third_party/dlpack")
install(FILES "${JITBRIDGE_THIRD_PARTY}/dlpack/LICENSE"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/jitbridge/third_party/dlpack")

install(TARGETS jitbridge_core EXPORT jitbridgeTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(EXPORT jitbridgeTargets NAMESPACE jitbridge:: DESTINATION "${JITBRIDGE_CMAKE_INSTALL_DIR}")

# The config searches the CUDA headers again (the machine using the package may have them elsewhere); the
# directories of this build are its last hint before the pip wheels.
set(JITBRIDGE_BUILT_CUDA_INCLUDE_DIRS "${JITBRIDGE_CUDA_INCLUDE_DIRS}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/jitbridgeConfig.cmake.in"
  "${CMAKE_CURRENT_BINARY_DIR}/cmake/jitbridgeConfig.cmake"
  INSTALL_DESTINATION "${JITBRIDGE_CMAKE_INSTALL_DIR}")
# 0.x: a minor version may break the API, so only the same major.minor is compatible.
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/cmake/jitbridgeConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/cmake/jitbridgeConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/cmake/jitbridgeConfigVersion.cmake"
              "${PROJECT_SOURCE_DIR}/cmake/JitbridgeCudaHeaders.cmake"
        DESTINATION "${JITBRIDGE_CMAKE_INSTALL_DIR}")
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/jitbridge")
