# run(<what> <expected exit code> <regex the output must match, or ""> COMMAND...): runs the command
# in WORK_DIR; stops with FATAL_ERROR and what it printed if the exit code or the output is not as
# expected; leaves stdout and stderr in run_output. Shared by the package tests' scripts.
function(run what rc regex)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE got OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  string(REPLACE ";" " " cmd "${ARGN}")
  if(NOT got STREQUAL "${rc}")
    message(FATAL_ERROR "${RUN_PREFIX}${what}: exit ${got}, expected ${rc}\n  command: ${cmd}\n"
                        "--- stdout ---\n${out}\n--- stderr ---\n${err}")
  endif()
  if(NOT regex STREQUAL "" AND NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "${RUN_PREFIX}${what}: the output does not match '${regex}'\n  command: ${cmd}\n"
                        "--- stdout ---\n${out}\n--- stderr ---\n${err}")
  endif()
  message(STATUS "${RUN_PREFIX}${what}: ok")
  set(run_output "${out}${err}" PARENT_SCOPE)
endfunction()
