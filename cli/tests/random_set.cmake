# `ringkv golden generate --random` (issue 10): a fresh set of random cases from the property
# generators, within a capabilities file; it verifies, the reference passes it, W + 1 fails it with a
# reproduce line that regenerates the set.
# With capabilities that declare rollback (ROLLBACK_CAPS, issue 26), the set carries rollback cases
# (honoured and refused), on by default, and the reference passes them.
#   cmake -DRINGKV=ringkv -DWORK=dir -DCAPS=caps.json -DROLLBACK_CAPS=caps.json -DMUTANT=plugin.so -P random_set.cmake
function(run expect_rc regex)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL "${expect_rc}")
    message(FATAL_ERROR "${ARGN}: expected exit code ${expect_rc}, got ${rc}\n${out}${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "${ARGN}: output does not match '${regex}'\n${out}${err}")
  endif()
endfunction()
file(REMOVE_RECURSE ${WORK})
run(0 "wrote 40 random cases \\(seed 5\\)" ${RINGKV} golden generate --random 40 --seed 5 --capabilities ${CAPS} --out ${WORK})
run(0 "golden set verified" ${RINGKV} golden verify ${WORK})
# Within the capabilities: every case is core.
run(0 "# 40 of 40 cases within the capabilities" ${RINGKV} golden list --golden ${WORK} --capabilities ${CAPS})
run(0 "PASSED: 40 passed" ${RINGKV} check --quiet --golden ${WORK} --engine reference --filter "^")
run(1 "reproduce: ringkv golden generate --random 40 --seed 5 --capabilities CAPS.json --out [^\n]*\n  then: ringkv check --engine [^\n]* --filter '\\^random_5_[0-9]+ '"
    ${RINGKV} check --quiet --golden ${WORK} --engine ${MUTANT} --filter "^")
# The same seed gives the same set; another seed another.
file(READ ${WORK}/manifest.json first)
run(0 "" ${RINGKV} golden generate --random 40 --seed 5 --capabilities ${CAPS} --out ${WORK}-again)
file(READ ${WORK}-again/manifest.json again)
if(NOT first STREQUAL again)
  message(FATAL_ERROR "the same seed gave another set")
endif()
run(0 "" ${RINGKV} golden generate --random 40 --seed 6 --capabilities ${CAPS} --out ${WORK}-other)
file(READ ${WORK}-other/manifest.json other)
if(first STREQUAL other)
  message(FATAL_ERROR "another seed gave the same set")
endif()
# Rollback (spec 1.1) where the capabilities declare it: 1 case in 13, as the properties draw them.
run(0 "wrote 40 random cases" ${RINGKV} golden generate --random 40 --seed 5 --capabilities ${ROLLBACK_CAPS} --out ${WORK}-rollback)
run(0 "golden set verified" ${RINGKV} golden verify ${WORK}-rollback)
run(0 "\nrandom_5_12  feature  [^\n]*rollback-refused[^\n]*\nrandom_5_13 .*\nrandom_5_25  feature  [^\n]*rollback-"
    ${RINGKV} golden list --golden ${WORK}-rollback)
run(0 "PASSED: 40 passed" ${RINGKV} check --quiet --golden ${WORK}-rollback --engine reference --filter "^")
message(STATUS "random golden sets: generated, verified, judged")
