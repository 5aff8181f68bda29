# ringkv: the installed tree works on its own, moved away from where it was installed (issue 12).
#
#   cmake -DRINGKV_BINARY_DIR=<build> -DWORK_DIR=<scratch> [-DBUILD_CONFIG=<config>] -P run_installed_tree_test.cmake
#
# 1. installs the (already built) build tree into WORK_DIR/prefix, then moves it to WORK_DIR/moved:
#    nothing may point back at the build tree, the source tree or the install prefix;
# 2. checks the tree holds the CLI and its plugin worker, the ABI header and its pkg-config file, the
#    shipped plugins, the golden set, the profiles, the docs and the example plugin;
# 3. from WORK_DIR (outside the source tree), runs the installed `ringkv check --engine reference`,
#    which must pass on the installed golden set (the report names its folder);
# 4. builds the installed skeleton plugin with `pkg-config --cflags ringkv-abi`, once as shipped (it
#    must pass `ringkv check`) and once with its planted window bug (it must fail, naming a case);
# 5. the installed mutant plugin must fail too, and the installed reference plugin pass;
# 6. a C++ engine's own CMake project (CONFORMANCE_PROJECT, copied out) registers ringkv's properties
#    and golden cases as its ctest tests: the engine passes, its planted-bug variant fails;
# 7. a Python engine's project (PYTHON_CONSUMER, copied out) with the ringkv wheel (built from
#    PYTHON_PACKAGE, installed with pip into WORK_DIR/site) and the venv PYTHON_VENV (numpy,
#    safetensors, pytest): `pytest --ringkv-engine` with the moved tree's bin/ on PATH (its golden set
#    found next to the CLI) passes the engine and fails its planted W + 1 window, naming a case.
# Any failure stops with FATAL_ERROR and the output of the step that failed.
cmake_minimum_required(VERSION 3.25)

foreach(var RINGKV_BINARY_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_installed_tree_test.cmake: -D${var}=... is required")
  endif()
endforeach()
set(config_args)
if(DEFINED BUILD_CONFIG AND NOT BUILD_CONFIG STREQUAL "")
  set(config_args --config ${BUILD_CONFIG})
endif()

set(RUN_PREFIX "installed tree: ")
include(${CMAKE_CURRENT_LIST_DIR}/run_helpers.cmake)

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
set(tree ${WORK_DIR}/moved)

# 1. Install, then move.
run("installing into ${prefix}" 0 "" ${CMAKE_COMMAND} --install ${RINGKV_BINARY_DIR} --prefix ${prefix} ${config_args})
file(RENAME ${prefix} ${tree})

# 2. What the tree holds.
foreach(path bin/ringkv bin/ringkv_plugin_worker include/ringkv/engine_abi.h share/ringkv/golden/manifest.json
             share/ringkv/examples/skeleton_plugin.c share/doc/ringkv/spec.md share/doc/ringkv/engine-abi.md
             share/doc/ringkv/golden-format.md)
  if(NOT EXISTS ${tree}/${path})
    message(FATAL_ERROR "installed tree: ${path} is missing")
  endif()
endforeach()
file(GLOB profiles ${tree}/share/ringkv/profiles/*.json)
file(GLOB_RECURSE pc_files ${tree}/*/ringkv-abi.pc)
file(GLOB_RECURSE reference_plugin ${tree}/*/ringkv/plugins/libringkv_plugin_reference.so)
file(GLOB_RECURSE mutant_plugin ${tree}/*/ringkv/plugins/libringkv_plugin_mutant_window_plus_one.so)
foreach(what profiles pc_files reference_plugin mutant_plugin)
  if(NOT ${what})
    message(FATAL_ERROR "installed tree: no ${what} under ${tree}")
  endif()
endforeach()
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir ${pc_file} DIRECTORY)

# 3. The installed CLI on the installed goldens, from outside the source tree.
run("ringkv check --engine reference on the installed goldens" 0
    "golden cases from ${tree}/share/ringkv/golden.*PASSED"
    ${tree}/bin/ringkv check --engine reference)

# 4. The skeleton plugin through pkg-config, as shipped and with its planted bug.
find_program(PKG_CONFIG pkg-config REQUIRED)
find_program(CC NAMES cc gcc clang REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run("pkg-config --cflags ringkv-abi" 0 "-I" ${PKG_CONFIG} --cflags ringkv-abi)
string(STRIP "${run_output}" cflags)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
if(NOT EXISTS "${tree}/include/ringkv/engine_abi.h")
  message(FATAL_ERROR "installed tree: pkg-config gave ${cflags}")
endif()
foreach(variant good bad)
  set(defs)
  if(variant STREQUAL "bad")
    set(defs -DRINGKV_SKELETON_WINDOW_PLUS_ONE)
  endif()
  run("building the skeleton plugin (${variant}) with pkg-config" 0 ""
      ${CC} -std=c99 -O2 -fPIC -shared ${cflags} ${defs} ${tree}/share/ringkv/examples/skeleton_plugin.c
      -o ${WORK_DIR}/libskeleton_${variant}.so -lm)
endforeach()
run("the skeleton plugin passes" 0 "PASSED"
    ${tree}/bin/ringkv check --quiet --engine ${WORK_DIR}/libskeleton_good.so)
run("the skeleton plugin with W + 1 fails" 1 "FAILED [a-z0-9_]+ \\[failed\\] on engine"
    ${tree}/bin/ringkv check --quiet --engine ${WORK_DIR}/libskeleton_bad.so)

# 5. The shipped plugins.
run("the installed reference plugin passes" 0 "PASSED" ${tree}/bin/ringkv check --quiet --engine ${reference_plugin})
run("the installed window_plus_one plugin fails" 1 "FAILED" ${tree}/bin/ringkv check --quiet --engine ${mutant_plugin})
# 6. A C++ engine in its own project (copied out of the source tree), its tests registered by
#    ringkv_add_conformance_tests: the engine as shipped passes every one, and with its planted
#    off-by-one window it fails properties and golden cases, each a ctest test of that project.
if(NOT DEFINED CONFORMANCE_PROJECT OR NOT EXISTS "${CONFORMANCE_PROJECT}/CMakeLists.txt")
  message(FATAL_ERROR "installed tree: -DCONFORMANCE_PROJECT=<conformance/consumer/conformance_project> is required")
endif()
file(COPY ${CONFORMANCE_PROJECT}/ DESTINATION ${WORK_DIR}/my_project)
set(generator_args)
if(DEFINED GENERATOR AND NOT GENERATOR STREQUAL "")
  set(generator_args -G ${GENERATOR})
endif()
run("configuring a C++ engine's project against the installed tree" 0 ""
    ${CMAKE_COMMAND} -S ${WORK_DIR}/my_project -B ${WORK_DIR}/my_project/build ${generator_args}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${tree} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_LINK_FLAGS}")
run("building it" 0 "" ${CMAKE_COMMAND} --build ${WORK_DIR}/my_project/build)
run("its ctest: the engine as shipped passes every property and golden case" 0
    "100% tests passed, 0 tests failed out of [0-9]+"
    ${CMAKE_CTEST_COMMAND} --test-dir ${WORK_DIR}/my_project/build -R "^MyEngine/" --output-junit junit.xml)
if(NOT run_output MATCHES "MyEngine/Property.Rollback" OR NOT run_output MATCHES "MyEngine/Golden.rollback_d128_bf16")
  message(FATAL_ERROR "installed tree: the project's tests are not one per property and golden case:\n${run_output}")
endif()
run("its ctest: the engine with W + 1 fails properties and golden cases" 8
    "MyBuggyEngine/Property.OracleEquality \\(Failed\\).*MyBuggyEngine/Golden.decode_w8 \\(Failed\\)"
    ${CMAKE_CTEST_COMMAND} --test-dir ${WORK_DIR}/my_project/build -R "^MyBuggyEngine/")

# 7. A Python engine with pytest: the pure-Python wheel of python/ (wheel.cmake=false: the CLI is the moved
# tree's, on PATH) installed with pip.
foreach(var PYTHON_VENV PYTHON_PACKAGE PYTHON_CONSUMER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "installed tree: -D${var}=... is required (the Python step)")
  endif()
endforeach()
set(py ${PYTHON_VENV}/bin/python)
execute_process(COMMAND ${py} -c "import numpy, safetensors, pytest, wheel, scikit_build_core" RESULT_VARIABLE py_ok
                OUTPUT_QUIET ERROR_QUIET)
if(NOT py_ok STREQUAL "0")
  message(FATAL_ERROR "installed tree: no virtual environment with numpy, safetensors, pytest, wheel and scikit-build-core "
                      "at ${PYTHON_VENV}: run ./scripts/install-engines.sh (python3 -m venv .venv && .venv/bin/pip "
                      "install -r engines/requirements.txt -r python/build-requirements.txt)")
endif()
file(COPY ${PYTHON_PACKAGE}/ DESTINATION ${WORK_DIR}/python-src PATTERN __pycache__ EXCLUDE)
run("building the ringkv wheel" 0 "" ${py} -m pip wheel --quiet --no-deps --no-build-isolation
    --config-settings=wheel.cmake=false --wheel-dir ${WORK_DIR}/dist ${WORK_DIR}/python-src)
file(GLOB wheel ${WORK_DIR}/dist/ringkv-*.whl)
run("pip installing it" 0 "" ${py} -m pip install --quiet --no-deps --target ${WORK_DIR}/site ${wheel})
file(COPY ${PYTHON_CONSUMER}/ DESTINATION ${WORK_DIR}/my_python_project PATTERN __pycache__ EXCLUDE)
set(py_env ${CMAKE_COMMAND} -E env --unset=RINGKV --unset=RINGKV_DATA_DIR PYTHONPATH=${WORK_DIR}/site
    "PATH=${tree}/bin:$ENV{PATH}" PYTHONDONTWRITEBYTECODE=1 ${CMAKE_COMMAND} -E chdir ${WORK_DIR}/my_python_project
    ${py} -m pytest -p no:cacheprovider -q -rf)
run("pytest --ringkv-engine: the Python engine passes every golden case" 0
    "([0-9]+) passed in"
    ${py_env} --ringkv-engine=my_engine:make_engine)
if(run_output MATCHES "failed|skipped" OR NOT run_output MATCHES "passed in")
  message(FATAL_ERROR "installed tree: the Python engine did not pass every case:\n${run_output}")
endif()
run("pytest --ringkv-engine: the Python engine with W + 1 fails, naming a case" 1
    "ringkv check: case decode_w8 failed.*boundary classes: .*needle-W\\+1.*FAILED ringkv-golden::decode_w8 "
    ${py_env} --ringkv-engine=my_engine:make_buggy_engine)
message(STATUS "installed tree test: passed")
