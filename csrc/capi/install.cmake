# Install rules of the C API (included from the top-level CMakeLists.txt).
#
# The wheel carries, next to the Python package (paths relative to site-packages):
#   autotile/include/autotile/{c_api.h,autotile.hpp}   public headers
#   autotile/lib/libautotile_core.a                    the static PIC core
#   autotile/cmake/autotileConfig*.cmake + targets     CMake package (autotile::core)
# so an outside project finds it with find_package(autotile CONFIG PATHS
# $(python -c "import autotile; print(autotile.get_cmake_dir())")). A plain
# `cmake --install` lays out the same tree under its prefix.
include(CMakePackageConfigHelpers)

set(AUTOTILE_INSTALL_INCLUDEDIR autotile/include)
set(AUTOTILE_INSTALL_LIBDIR autotile/lib)
set(AUTOTILE_INSTALL_CMAKEDIR autotile/cmake)

# One version for Python and C: pyproject.toml's (scikit-build-core also passes it).
if(DEFINED SKBUILD_PROJECT_VERSION)
  set(AUTOTILE_VERSION ${SKBUILD_PROJECT_VERSION})
else()
  file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/pyproject.toml _autotile_version_line REGEX "^version *= *\"")
  string(REGEX REPLACE "^version *= *\"([^\"]*)\".*" "\\1" AUTOTILE_VERSION "${_autotile_version_line}")
endif()
set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/csrc/capi/capi_common.cc
  PROPERTIES COMPILE_DEFINITIONS "AUTOTILE_VERSION=\"${AUTOTILE_VERSION}\"")

# Outside users see only the public headers; csrc/ stays a build-tree include.
target_include_directories(autotile_core INTERFACE $<INSTALL_INTERFACE:${AUTOTILE_INSTALL_INCLUDEDIR}>)
set_target_properties(autotile_core PROPERTIES EXPORT_NAME core)

install(TARGETS autotile_core EXPORT autotileTargets
  ARCHIVE DESTINATION ${AUTOTILE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${AUTOTILE_INSTALL_LIBDIR})
install(FILES
  ${CMAKE_CURRENT_SOURCE_DIR}/csrc/include/autotile/c_api.h
  ${CMAKE_CURRENT_SOURCE_DIR}/csrc/include/autotile/autotile.hpp
  DESTINATION ${AUTOTILE_INSTALL_INCLUDEDIR}/autotile)
install(EXPORT autotileTargets NAMESPACE autotile:: DESTINATION ${AUTOTILE_INSTALL_CMAKEDIR})

configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/csrc/capi/autotileConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/autotileConfig.cmake
  INSTALL_DESTINATION ${AUTOTILE_INSTALL_CMAKEDIR}
  PATH_VARS AUTOTILE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/autotileConfigVersion.cmake
  VERSION ${AUTOTILE_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/autotileConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/autotileConfigVersion.cmake
  DESTINATION ${AUTOTILE_INSTALL_CMAKEDIR})
