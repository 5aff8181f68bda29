# ringkv_discovered_labels(TARGET LABELS...): sets the labels of every test gtest_discover_tests found in
# TARGET (its TEST_LIST, ${TARGET}_TESTS). gtest_discover_tests(... PROPERTIES LABELS "a;b") flattens the
# list into separate arguments (CMake 3.25), so the labels are set by a ctest include file read after the
# discovered tests' own (TEST_INCLUDE_FILES keeps the order of the calls).
function(ringkv_discovered_labels target)
  string(JOIN ";" labels ${ARGN})
  set(file "${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake")
  file(WRITE "${file}" "if(${target}_TESTS)\n  set_tests_properties(\${${target}_TESTS} PROPERTIES LABELS \"${labels}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${file}")
endfunction()
