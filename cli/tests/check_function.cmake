# check(NAME RC MATCH REJECT ARGS...): runs ${RINGKV} with ARGS, checks the exit code and the output
# (expect_exit.cmake; REJECT "" rejects nothing). Included by the CLI test scripts that run ringkv
# several times (malformed_inputs.cmake, scale_outputs.cmake).
function(check name rc match reject)
  message(STATUS "${name}")
  set(CMD ${RINGKV} ${ARGN})
  set(EXPECT_RC ${rc})
  set(EXPECT_REGEX "${match}")
  set(REJECT_REGEX "${reject}")
  set(EXPECT_STDERR_REGEX "")
  include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)
endfunction()
