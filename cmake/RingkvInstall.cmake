# Installs ringkv as a CMake package: find_package(ringkv) gives ringkv::reference and ringkv::cuda
# (the CUDA engine where nvcc was found; always its host half, the cuda-plan engine).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS ringkv_reference ringkv_cuda EXPORT ringkvTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY reference/include/ringkv cuda/include/ringkv DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(RINGKV_PACKAGE_NEEDS_CUDA ${RINGKV_CUDA})
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
