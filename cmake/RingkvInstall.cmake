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
