# Installs ringkv as a CMake package: find_package(ringkv) gives ringkv::reference and ringkv::cuda
# (the CUDA engine where nvcc was found; always its host half, the cuda-plan engine).
include(GNUInstallDirs)
# The Python platform wheel (python/pyproject.toml, scikit-build-core installs into ringkv/_data): the
# CLI with its worker next to it and what it reads relative to itself (support/data_dir.hpp), the plugin
# ABI header and the C skeleton; no libraries, CMake package, plugins or docs.
option(RINGKV_WHEEL "Install only what the Python wheel carries" OFF)
if(RINGKV_WHEEL)
  install(TARGETS ringkv ringkv_plugin_worker RUNTIME DESTINATION bin)
  install(FILES abi/include/ringkv/engine_abi.h DESTINATION include/ringkv)
  install(FILES abi/examples/skeleton_plugin.c DESTINATION share/ringkv/examples)
  install(DIRECTORY golden/ DESTINATION share/ringkv/golden)
  install(DIRECTORY profiles/ DESTINATION share/ringkv/profiles)
  return()
endif()
include(CMakePackageConfigHelpers)
install(TARGETS ringkv_reference ringkv_cuda EXPORT ringkvTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY reference/include/ringkv cuda/include/ringkv DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(RINGKV_PACKAGE_NEEDS_CUDA ${RINGKV_CUDA})
# The conformance component (issue 12): oracle, tolerance, generators, runner, properties, mutants,
# golden checks and the property runner, as ringkv::conformance, ringkv::golden,
# ringkv::property_runner and ringkv::conformance_gtest (a C++ engine's own tests,
# ringkv_add_conformance_tests()). Built with the tests (RINGKV_BUILD_TESTS).
set(RINGKV_PACKAGE_HAS_CONFORMANCE OFF)
if(TARGET ringkv_conformance AND TARGET ringkv_golden AND TARGET ringkv_property_runner AND TARGET ringkv_conformance_gtest)
  set(RINGKV_PACKAGE_HAS_CONFORMANCE ON)
  install(TARGETS ringkv_conformance ringkv_golden ringkv_property_runner ringkv_conformance_gtest EXPORT ringkvTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY conformance/support conformance/property conformance/golden conformance/mutants
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ringkv/conformance FILES_MATCHING PATTERN "*.hpp")
  install(FILES cli/property_runner.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ringkv/conformance)
  install(FILES conformance/include/ringkv/conformance/gtest.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ringkv/conformance)
  install(FILES cmake/ringkvConformance.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ringkv)
endif()
install(EXPORT ringkvTargets NAMESPACE ringkv:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ringkv)
configure_package_config_file(cmake/ringkvConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/ringkvConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ringkv)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ringkvConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ringkvConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ringkvConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ringkv)

# ---- the installed tree a user's project uses (issue 12) ----
# bin/ringkv with its plugin worker next to it (where PluginEngine looks first), the plugin ABI header
# with a pkg-config file for C plugins, the shipped plugins, the golden set and the named profiles
# under share/ringkv (the installed CLI's defaults, support/data_dir.hpp), and the normative docs.
if(TARGET ringkv)
  install(TARGETS ringkv RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET ringkv_plugin_worker)
  install(TARGETS ringkv_plugin_worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(FILES abi/include/ringkv/engine_abi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ringkv)
# prefix relative to the .pc file, so that a moved tree still works
file(RELATIVE_PATH RINGKV_PC_PREFIX_FROM_PCFILEDIR /ringkv-root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /ringkv-root)
configure_file(cmake/ringkv-abi.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ringkv-abi.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ringkv-abi.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
foreach(plugin reference mutant_window_plus_one)
  if(TARGET ringkv_plugin_${plugin})
    install(TARGETS ringkv_plugin_${plugin} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/ringkv/plugins)
  endif()
endforeach()
install(FILES abi/examples/skeleton_plugin.c DESTINATION ${CMAKE_INSTALL_DATADIR}/ringkv/examples)
install(DIRECTORY golden/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ringkv/golden)
install(DIRECTORY profiles/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ringkv/profiles)
install(FILES README.md docs/spec.md docs/golden-format.md docs/engine-abi.md docs/tolerances.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- a .deb of the same tree (CPack; `cpack -G DEB` in the build folder) ----
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ringkv)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "ringkv maintainers")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # fast to build in the tests; the golden set barely compresses
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6, libstdc++6")
# The C++ conformance component's headers and static libraries build against these.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "librapidcheck-dev, libgtest-dev, nlohmann-json3-dev, pkg-config")
include(CPack)
