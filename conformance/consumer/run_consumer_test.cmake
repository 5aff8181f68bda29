# ringkv: the installed package works for a consumer.
#
#   cmake -DRINGKV_SOURCE_DIR=<src> -DRINGKV_BINARY_DIR=<build> -DWORK_DIR=<scratch>
#         [-DGENERATOR=<generator>] [-DBUILD_CONFIG=<config>] [-DCONSUMER_LINK_FLAGS=<flags>]
#         -P run_consumer_test.cmake
# CONSUMER_LINK_FLAGS: what a sanitizer build's static library needs at the consumer's link.
#
# 1. installs the (already built) ringkv build tree into WORK_DIR/prefix,
# 2. configures conformance/consumer/project against that prefix only
#    (find_package(ringkv CONFIG REQUIRED), target ringkv::reference),
# 3. builds it and runs the executable, which must print "ringkv consumer: OK".
# Any failure stops with FATAL_ERROR (a non-zero exit: the test fails) and the
# output of the step that failed.
cmake_minimum_required(VERSION 3.25)

foreach(var RINGKV_SOURCE_DIR RINGKV_BINARY_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_test.cmake: -D${var}=... is required")
  endif()
endforeach()
# BUILD_CONFIG: the configuration to install and build (multi-config generators).
# Unset, the install takes the build tree's own CMAKE_BUILD_TYPE and the consumer builds Release.
set(config_args)
set(consumer_type Release)
if(DEFINED BUILD_CONFIG AND NOT BUILD_CONFIG STREQUAL "")
  set(config_args --config ${BUILD_CONFIG})
  set(consumer_type ${BUILD_CONFIG})
endif()

set(prefix ${WORK_DIR}/prefix)
set(consumer_source ${RINGKV_SOURCE_DIR}/conformance/consumer/project)
set(consumer_build ${WORK_DIR}/build)

# Runs a command; on failure stops with what it printed.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "0")
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "consumer test: ${what} failed (exit ${rc})\n  command: ${cmd}\n"
                        "--- stdout ---\n${out}\n--- stderr ---\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# A clean scratch area every run: nothing from a previous install may help.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

if(NOT EXISTS ${RINGKV_BINARY_DIR}/cmake_install.cmake)
  message(FATAL_ERROR "consumer test: ${RINGKV_BINARY_DIR} has no cmake_install.cmake; configure ringkv there first")
endif()

# 1. Install. cmake --install does not build: the ringkv targets must be built already.
run_step("installing ringkv into ${prefix} (is ringkv built? run cmake --build first)"
         ${CMAKE_COMMAND} --install ${RINGKV_BINARY_DIR} --prefix ${prefix} ${config_args})
message(STATUS "installed ringkv into ${prefix}")

file(GLOB_RECURSE config_files ${prefix}/*/ringkvConfig.cmake)
if(NOT config_files)
  message(FATAL_ERROR "consumer test: the install put no ringkvConfig.cmake under ${prefix}")
endif()

# 2. Configure the consumer against the prefix only: no package registry, no system ringkv.
set(generator_args)
if(DEFINED GENERATOR AND NOT GENERATOR STREQUAL "")
  set(generator_args -G ${GENERATOR})
endif()
run_step("configuring the consumer project"
         ${CMAKE_COMMAND} -S ${consumer_source} -B ${consumer_build} ${generator_args}
         -DCMAKE_BUILD_TYPE=${consumer_type}
         -DCMAKE_PREFIX_PATH=${prefix}
         -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
         -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
         "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_LINK_FLAGS}")

# The package must have come from the prefix just installed, not from elsewhere.
file(STRINGS ${consumer_build}/CMakeCache.txt ringkv_dir_line REGEX "^ringkv_DIR:")
string(REGEX REPLACE "^ringkv_DIR:[A-Z]+=" "" found_dir "${ringkv_dir_line}")
file(REAL_PATH "${prefix}" real_prefix)
if(EXISTS "${found_dir}")
  file(REAL_PATH "${found_dir}" found_dir)
endif()
string(FIND "${found_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "consumer test: find_package(ringkv) used '${found_dir}', not the package installed in ${prefix}")
endif()
message(STATUS "consumer found ringkv in ${found_dir}")

# 3. Build and run.
run_step("building the consumer project" ${CMAKE_COMMAND} --build ${consumer_build} --config ${consumer_type})

set(exe "")
foreach(candidate ${consumer_build}/ringkv_consumer ${consumer_build}/ringkv_consumer.exe
                  ${consumer_build}/${consumer_type}/ringkv_consumer ${consumer_build}/${consumer_type}/ringkv_consumer.exe)
  if(EXISTS ${candidate} AND NOT IS_DIRECTORY ${candidate})
    set(exe ${candidate})
    break()
  endif()
endforeach()
if(exe STREQUAL "")
  message(FATAL_ERROR "consumer test: the build produced no ringkv_consumer executable in ${consumer_build}")
endif()

run_step("running the consumer (${exe})" ${exe})
message(STATUS "consumer output:\n${step_output}")
string(FIND "${step_output}" "ringkv consumer: OK" ok)
if(ok EQUAL -1)
  message(FATAL_ERROR "consumer test: the consumer exited 0 but did not print 'ringkv consumer: OK'")
endif()
message(STATUS "consumer test: passed")
