# A golden set with one byte flipped in a case's tensor data: `ringkv check` must report that file as
# unusable input (ERROR, exit code 2, JUnit <error>, JSON status "error") and say nothing against the
# engine, while the intact case of the same run is still judged (issue 11).
#   cmake -DRINGKV=ringkv -DGOLDEN=golden -DWORK=dir -DPYTHON=python3 -P corrupt_golden.cmake
# WORK may be relative (to the working directory), as a user's --golden often is.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/cases)
file(COPY ${GOLDEN}/manifest.json DESTINATION ${WORK})
file(COPY ${GOLDEN}/cases/decode_w8.safetensors ${GOLDEN}/cases/window_1.safetensors DESTINATION ${WORK}/cases)
# Flip one bit of the last byte: tensor data (expected values, say), not the header.
execute_process(COMMAND ${PYTHON} -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[-1]^=1; open(p,'wb').write(b)"
                        ${WORK}/cases/decode_w8.safetensors RESULT_VARIABLE flip_rc)
if(NOT flip_rc EQUAL 0)
  message(FATAL_ERROR "could not flip a byte (${flip_rc})")
endif()
set(CMD ${RINGKV} check --engine reference --golden ${WORK} --filter "^(decode_w8|window_1) " --junit ${WORK}/junit.xml
        --json ${WORK}/report.json)
set(EXPECT_RC 2)
set(EXPECT_REGEX "ERROR decode_w8 \\(engine reference not judged on it\\)\n  unusable golden case: [^\n]*decode_w8.safetensors has sha256 [0-9a-f]+, its manifest says [0-9a-f]+.*ERROR: 1 passed, 0 failed, 0 xfail, 0 skipped golden cases, 1 unusable golden file")
set(REJECT_REGEX "FAILED")
include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)
file(READ ${WORK}/junit.xml junit)
if(NOT junit MATCHES "<testcase classname=\"golden\" name=\"decode_w8\"><error message=\"unusable golden case")
  message(FATAL_ERROR "JUnit lacks the <error> of decode_w8:\n${junit}")
endif()
if(junit MATCHES "<failure")
  message(FATAL_ERROR "JUnit blames the engine:\n${junit}")
endif()
file(READ ${WORK}/report.json report)
if(NOT report MATCHES "\"name\": \"decode_w8\"[^}]*\"status\": \"error\"" AND NOT report MATCHES "\"status\": \"error\"[^}]*\"name\": \"decode_w8\"")
  message(FATAL_ERROR "the JSON report lacks status error for decode_w8:\n${report}")
endif()
