# `ringkv check --jobs N` (issue 11): the report is the same, verdict for verdict, for one job and for
# four: the table and summary on stdout, the JSON report and the JUnit report, compared whole once the
# timings are masked (the only fields that may differ: "found after 0.01 s", "candidates tried, 0.02 s",
# "tried, 0.02 s", and the JSON's seconds_to_first / seconds_shrinking).
#   - the reference engine: every golden case and the 13 properties (5 cases each), all passing;
#   - with MUTANT (a mutant plugin): golden failures, property failures, their first failing cases,
#     their shrunk cases (--shrink-time inf: the shrink runs to its end, so its result does not
#     depend on time) and replay tokens; the four-job run also shows its progress, and every stderr
#     line must be whole (one progress line or one line of a first-failing-case block);
#   - with FIXTURE (ringkv_outputs_fixture): `--outputs`, files an external engine wrote (passed,
#     failed and skipped cases).
#   cmake -DRINGKV=ringkv -DWORK=dir -DGOLDEN_CASES=n [-DMUTANT=plugin.so] [-DFIXTURE=fixture -DGOLDEN=golden/] -P jobs_same_report.cmake
#   (n: the committed golden set's size, every one of which the reference passes)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(mask_timings var)
  set(t "${${var}}")
  string(REGEX REPLACE "(found after|candidates tried,|tried,) [0-9]+\\.[0-9]+ s" "\\1 <time> s" t "${t}")
  string(REGEX REPLACE "\"(seconds_[a-z_]+)\": [-+0-9.eE]+" "\"\\1\": <time>" t "${t}")
  set(${var} "${t}" PARENT_SCOPE)
endfunction()

# run_at(NAME jobs expected_rc ARGS...): runs ringkv check with --jobs and the reports under WORK/NAME-jJOBS.*;
# sets NAME_j<JOBS>_out and _err.
function(run_at name jobs expected_rc)
  set(base "${WORK}/${name}-j${jobs}")
  execute_process(COMMAND ${RINGKV} check --jobs ${jobs} --json ${base}.json --junit ${base}.xml ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "${name}, --jobs ${jobs}: expected exit code ${expected_rc}, got ${rc}\n${out}${err}")
  endif()
  set(${name}_j${jobs}_out "${out}" PARENT_SCOPE)
  set(${name}_j${jobs}_err "${err}" PARENT_SCOPE)
endfunction()

# same_reports(NAME): stdout, JSON and JUnit of --jobs 1 and --jobs 4, timings masked, identical.
function(same_reports name)
  file(READ "${WORK}/${name}-j1.json" json1)
  file(READ "${WORK}/${name}-j4.json" json4)
  file(READ "${WORK}/${name}-j1.xml" xml1)
  file(READ "${WORK}/${name}-j4.xml" xml4)
  set(out1 "${${name}_j1_out}")
  set(out4 "${${name}_j4_out}")
  foreach(kind out json xml)
    mask_timings(${kind}1)
    mask_timings(${kind}4)
    if(NOT "${${kind}1}" STREQUAL "${${kind}4}")
      file(WRITE "${WORK}/${name}-j1.${kind}.masked" "${${kind}1}")
      file(WRITE "${WORK}/${name}-j4.${kind}.masked" "${${kind}4}")
      message(FATAL_ERROR "${name}: the ${kind} report of --jobs 4 differs from --jobs 1 (timings masked): "
                          "diff ${WORK}/${name}-j1.${kind}.masked ${WORK}/${name}-j4.${kind}.masked")
    endif()
  endforeach()
  string(LENGTH "${json1}" n)
  message(STATUS "${name}: stdout, JSON (${n} characters) and JUnit the same for --jobs 1 and --jobs 4")
endfunction()

# The reference engine: golden cases and properties, all passing.
foreach(jobs 1 4)
  run_at(reference ${jobs} 0 --quiet --engine reference --properties --cases 5)
endforeach()
if(NOT reference_j1_out MATCHES "PASSED: ${GOLDEN_CASES} passed, 0 failed.*13 properties \\(seed 1, 5 cases each\\), 0 failed")
  message(FATAL_ERROR "reference: not the expected summary\n${reference_j1_out}")
endif()
same_reports(reference)

if(MUTANT)
  run_at(mutant 1 1 --quiet --engine ${MUTANT} --properties --cases 20 --shrink-time inf)
  run_at(mutant 4 1 --engine ${MUTANT} --properties --cases 20 --shrink-time inf)
  # The comparison has failures of every kind to compare.
  foreach(re "FAILED [a-z0-9_]+ \\[failed\\] on engine" "property [A-Za-z]+ +FAILED on engine"
             "\n    fully shrunk: [0-9]+ steps" "--replay '[A-Za-z]+:seed=1:case=[0-9]+:size=[0-9]+:shrink=[0-9.]+'")
    if(NOT mutant_j1_out MATCHES "${re}")
      message(FATAL_ERROR "mutant: the report has nothing matching '${re}'\n${mutant_j1_out}")
    endif()
  endforeach()
  same_reports(mutant)
  # Progress of parallel jobs: whole lines only (what is left once every well-formed line is removed).
  # The lines: "[ENGINE i/n] case", "[properties] ..." and "[shrink] ..." (no second '[' in either), and
  # the first failing case's block ("  case: ...", "  first failing step: ...", "  reason: ...", "  reproduce: ...").
  string(REGEX REPLACE "\n(\\[[^] \n]+ [0-9]+/[0-9]+\\] [A-Za-z0-9_.+-]+|\\[(properties|shrink)\\] [^[\n]+|  (case|first failing step|reason|reproduce): [^\n]+)"
         "" rest "\n${mutant_j4_err}")
  if(NOT rest STREQUAL "" AND NOT rest STREQUAL "\n")
    message(FATAL_ERROR "mutant, --jobs 4: stderr holds text that is not a whole progress line:\n${rest}\n--- stderr ---\n${mutant_j4_err}")
  endif()
  if(NOT mutant_j4_err MATCHES "\\[shrink\\] [A-Za-z]+: fully shrunk")
    message(FATAL_ERROR "mutant, --jobs 4: no shrink progress on stderr\n${mutant_j4_err}")
  endif()
endif()

if(FIXTURE)
  # Outputs of a core f32 engine with its capabilities file, one outputs file left out: passes, one
  # failure (the missing file) and cases skipped as outside the capabilities.
  execute_process(COMMAND ${FIXTURE} ${GOLDEN} ${WORK}/outputs core-f32-caps-missing
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ringkv_outputs_fixture failed (${rc}): ${err}")
  endif()
  foreach(jobs 1 4)
    run_at(outputs ${jobs} 1 --quiet --golden ${GOLDEN} --outputs ${WORK}/outputs)
  endforeach()
  if(NOT outputs_j1_out MATCHES "FAILED: [1-9][0-9]* passed, 1 failed, 0 xfail, [1-9][0-9]* skipped")
    message(FATAL_ERROR "outputs: expected passes, one failure and skipped cases\n${outputs_j1_out}")
  endif()
  same_reports(outputs)
endif()
