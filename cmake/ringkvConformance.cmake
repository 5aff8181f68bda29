# ringkv_add_conformance_tests(<target> [CASES n] [SHRINK_TIME seconds])
#
# Makes <target> (an executable with RINGKV_CONFORMANCE_TESTS(...) from <ringkv/conformance/gtest.hpp>)
# a GoogleTest binary linked against ringkv, and registers each of its tests as a ctest test through
# gtest_discover_tests: <Suite>/Property.<name> for the 13 properties and <Suite>/Golden.<case> for the
# installed golden set. CASES: cases per property (default 100); SHRINK_TIME: the shrink budget of a
# failing property (default 60 s). JUnit: `ctest --output-junit report.xml`.
include(GoogleTest)
function(ringkv_add_conformance_tests target)
  cmake_parse_arguments(A "" "CASES;SHRINK_TIME" "" ${ARGN})
  target_link_libraries(${target} PRIVATE ringkv::conformance_gtest GTest::gtest_main)
  target_compile_definitions(${target} PRIVATE "RINGKV_CONFORMANCE_DATA_DIR=\"${RINGKV_DATA_DIR}\"")
  if(DEFINED A_CASES)
    target_compile_definitions(${target} PRIVATE RINGKV_CONFORMANCE_CASES=${A_CASES})
  endif()
  if(DEFINED A_SHRINK_TIME)
    target_compile_definitions(${target} PRIVATE RINGKV_CONFORMANCE_SHRINK_TIME=${A_SHRINK_TIME})
  endif()
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60)
endfunction()
