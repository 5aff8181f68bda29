# Runs a command and checks its exit code and output.
#   cmake -DCMD="prog;arg1;arg2" -DEXPECT_RC=2 [-DEXPECT_REGEX=...] [-DREJECT_REGEX=...] [-DEXPECT_STDERR_REGEX=...]
#         -P expect_exit.cmake
# EXPECT_REGEX and REJECT_REGEX see stdout followed by stderr; EXPECT_STDERR_REGEX sees stderr alone (the
# order of the progress lines). An empty regex is no check.
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "expected exit code ${EXPECT_RC}, got ${rc}\n--- output ---\n${all}")
endif()
if(NOT "${EXPECT_REGEX}" STREQUAL "" AND NOT all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}'\n--- output ---\n${all}")
endif()
if(NOT "${REJECT_REGEX}" STREQUAL "" AND all MATCHES "${REJECT_REGEX}")
  message(FATAL_ERROR "output matches '${REJECT_REGEX}'\n--- output ---\n${all}")
endif()
if(NOT "${EXPECT_STDERR_REGEX}" STREQUAL "" AND NOT err MATCHES "${EXPECT_STDERR_REGEX}")
  message(FATAL_ERROR "stderr does not match '${EXPECT_STDERR_REGEX}'\n--- stderr ---\n${err}")
endif()
message(STATUS "exit ${rc} as expected")
