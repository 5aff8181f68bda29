# Writes outputs files with ringkv_outputs_fixture, then runs `ringkv check --outputs` on them and checks
# its exit code, its output (expect_exit.cmake) and, if given, its JSON report.
#   cmake -DFIXTURE="fixture;GOLDEN;OUT;MODE" -DCMD="ringkv;check;..." -DEXPECT_RC=1 [-DEXPECT_REGEX=...]
#         [-DREJECT_REGEX=...] [-DJSON=report.json -DJSON_REGEX=...] -P outputs_check.cmake
execute_process(COMMAND ${FIXTURE} RESULT_VARIABLE fixture_rc ERROR_VARIABLE fixture_err)
if(NOT fixture_rc EQUAL 0)
  message(FATAL_ERROR "ringkv_outputs_fixture failed (${fixture_rc}): ${fixture_err}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)
if(NOT "${JSON_REGEX}" STREQUAL "")
  file(READ "${JSON}" report)
  if(NOT report MATCHES "${JSON_REGEX}")
    message(FATAL_ERROR "the JSON report does not match '${JSON_REGEX}'\n--- ${JSON} ---\n${report}")
  endif()
endif()
