# Writes outputs files with ringkv_outputs_fixture, then runs `ringkv check --outputs` on them and checks
# its exit code, its output (expect_exit.cmake) and, if given, its JSON report.
#   cmake -DFIXTURE="fixture;GOLDEN;OUT;MODE" -DCMD="ringkv;check;..." -DEXPECT_RC=1 [-DEXPECT_REGEX=...]
#         [-DREJECT_REGEX=...] [-DJSON=report.json -DJSON_REGEX=...] [-DJUNIT=report.xml -DJUNIT_REGEX=...]
#         -P outputs_check.cmake
execute_process(COMMAND ${FIXTURE} RESULT_VARIABLE fixture_rc ERROR_VARIABLE fixture_err)
if(NOT fixture_rc EQUAL 0)
  message(FATAL_ERROR "ringkv_outputs_fixture failed (${fixture_rc}): ${fixture_err}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)
foreach(report_kind JSON JUNIT)  # the JSON and JUnit reports, where a regex is given
  if(NOT "${${report_kind}_REGEX}" STREQUAL "")
    file(READ "${${report_kind}}" report)
    if(NOT report MATCHES "${${report_kind}_REGEX}")
      message(FATAL_ERROR "the ${report_kind} report does not match '${${report_kind}_REGEX}'\n--- ${${report_kind}} ---\n${report}")
    endif()
  endif()
endforeach()
