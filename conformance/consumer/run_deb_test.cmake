# ringkv: the .deb holds the installed tree, and its CLI runs from the unpacked package (issue 12).
#
#   cmake -DRINGKV_BINARY_DIR=<build> -DWORK_DIR=<scratch> -P run_deb_test.cmake
#
# 1. `cpack -G DEB` in the (built) build folder, the package written to WORK_DIR;
# 2. `dpkg-deb --info` names the package, `dpkg-deb --contents` lists the CLI, its worker, the ABI
#    header and its pkg-config file, the plugins, the golden set, the profiles, the docs and the
#    CMake package;
# 3. the package unpacked into WORK_DIR/root (`dpkg-deb -x`, no root needed): its `ringkv check` passes
#    on its own golden set, run from WORK_DIR.
cmake_minimum_required(VERSION 3.25)
foreach(var RINGKV_BINARY_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_deb_test.cmake: -D${var}=... is required")
  endif()
endforeach()

set(RUN_PREFIX "deb: ")
include(${CMAKE_CURRENT_LIST_DIR}/run_helpers.cmake)

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
get_filename_component(cmake_bin ${CMAKE_COMMAND} DIRECTORY)
find_program(CPACK cpack HINTS ${cmake_bin} REQUIRED)
find_program(DPKG_DEB dpkg-deb REQUIRED)
run("cpack -G DEB" 0 "" ${CPACK} -G DEB --config ${RINGKV_BINARY_DIR}/CPackConfig.cmake -B ${WORK_DIR})
file(GLOB debs ${WORK_DIR}/ringkv_*.deb)
list(LENGTH debs n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "deb: expected one ringkv_*.deb in ${WORK_DIR}, found: ${debs}")
endif()
list(GET debs 0 deb)
run("dpkg-deb --info" 0 "Package: ringkv" ${DPKG_DEB} --info ${deb})
run("dpkg-deb --contents" 0 "" ${DPKG_DEB} --contents ${deb})
foreach(path usr/bin/ringkv usr/bin/ringkv_plugin_worker usr/include/ringkv/engine_abi.h
             usr/include/ringkv/reference_engine.hpp usr/share/ringkv/golden/manifest.json
             usr/share/ringkv/examples/skeleton_plugin.c usr/share/doc/ringkv/spec.md
             "usr/lib/[^ \n]*pkgconfig/ringkv-abi.pc" "usr/lib/[^ \n]*ringkv/plugins/libringkv_plugin_reference.so"
             "usr/lib/[^ \n]*cmake/ringkv/ringkvConfig.cmake" "usr/share/ringkv/profiles/[a-z0-9_-]+.json")
  if(NOT run_output MATCHES " \\./${path}\n")
    message(FATAL_ERROR "deb: the package does not hold ${path}:\n${run_output}")
  endif()
endforeach()
run("dpkg-deb -x" 0 "" ${DPKG_DEB} -x ${deb} ${WORK_DIR}/root)
run("the packaged ringkv check on the packaged goldens" 0 "golden cases from ${WORK_DIR}/root/usr/share/ringkv/golden.*PASSED"
    ${WORK_DIR}/root/usr/bin/ringkv check --engine reference)
message(STATUS "deb test: passed")
