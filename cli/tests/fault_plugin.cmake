# One run of `ringkv check` with a faulty plugin and the reference plugin (issue 11's gallery,
# docs/reliability.md "Faulty plugins"): the exit code and the report (expect_exit.cmake), then the JSON
# and JUnit reports it wrote.
#   cmake -DCMD="ringkv;check;...;--json;J;--junit;X" -DEXPECT_RC=rc -DEXPECT_REGEX=re [-DREJECT_REGEX=re]
#         -DJSON=J -DJSON_REGEX=re [-DJSON_REJECT=re] -DJUNIT=X -DJUNIT_REGEX=re -P fault_plugin.cmake
file(REMOVE ${JSON} ${JUNIT})
include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)
file(READ ${JSON} report)
if(NOT report MATCHES "${JSON_REGEX}")
  message(FATAL_ERROR "the JSON report does not match '${JSON_REGEX}':\n${report}")
endif()
if(NOT "${JSON_REJECT}" STREQUAL "" AND report MATCHES "${JSON_REJECT}")
  message(FATAL_ERROR "the JSON report matches '${JSON_REJECT}':\n${report}")
endif()
file(READ ${JUNIT} junit)
if(NOT junit MATCHES "${JUNIT_REGEX}")
  message(FATAL_ERROR "the JUnit report does not match '${JUNIT_REGEX}':\n${junit}")
endif()
