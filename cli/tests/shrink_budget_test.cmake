# A shrink that cannot finish within --shrink-time: the slow test plugin (engine creation takes
# 500 ms; its full shrink takes about 7 s) with a 2 s budget. The run must end within the budget
# plus slack, report the shrunk case as NOT FULLY SHRUNK, and the replay lines of the report must
# run exactly the cases they name (the shrunk one and the first failing one).
#   cmake -DRINGKV=path/to/ringkv -DPLUGIN=path/to/libringkv_plugin_shrink_slow.so -P shrink_budget_test.cmake
set(budget 2)
set(slack 4)  # start, the first case (one engine, 0.5 s), the candidate in flight when the budget ends
string(TIMESTAMP t0 "%s%f")
execute_process(COMMAND ${RINGKV} check --no-golden --properties --filter "^OracleEquality$" --shrink-time ${budget}
                        --engine ${PLUGIN}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP t1 "%s%f")
math(EXPR elapsed_ms "(${t1} - ${t0}) / 1000")
set(all "${out}${err}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected exit code 1, got ${rc}\n${all}")
endif()
math(EXPR limit_ms "(${budget} + ${slack}) * 1000")
if(elapsed_ms GREATER limit_ms)
  message(FATAL_ERROR "took ${elapsed_ms} ms, more than the ${budget} s budget plus ${slack} s\n${all}")
endif()
if(NOT out MATCHES "NOT FULLY SHRUNK: the 2.00 s budget \\(--shrink-time\\) was spent after [0-9]+ steps")
  message(FATAL_ERROR "no NOT FULLY SHRUNK report\n${all}")
endif()
if(NOT err MATCHES "\\[shrink\\] OracleEquality: stopped, the budget is spent: NOT FULLY SHRUNK")
  message(FATAL_ERROR "no end-of-shrink line on stderr\n${err}")
endif()
# The report: first failing case (its id, its replay token), then the shrunk case (the same).
# (Case ids hold ';', CMake's list separator: compare them with ',' instead.)
string(REPLACE ";" "," out "${out}")
string(REGEX MATCHALL "\n    case: [^\n]+" ids "${out}")
string(REGEX MATCHALL "--replay '[^']+'" tokens "${out}")
list(LENGTH ids n_ids)
list(LENGTH tokens n_tokens)
if(NOT n_ids EQUAL 2 OR NOT n_tokens EQUAL 2)
  message(FATAL_ERROR "expected two cases and two replay lines in the report, got ${n_ids} and ${n_tokens}\n${out}")
endif()
foreach(i 0 1)
  list(GET ids ${i} id)
  list(GET tokens ${i} token)
  string(REGEX REPLACE "^--replay '([^']+)'$" "\\1" token "${token}")
  string(REGEX REPLACE "^\n    case: " "" id "${id}")
  execute_process(COMMAND ${RINGKV} check --quiet --engine ${PLUGIN} --no-golden --replay ${token}
                  RESULT_VARIABLE rrc OUTPUT_VARIABLE rout ERROR_VARIABLE rerr)
  string(REPLACE ";" "," rout "${rout}")
  string(FIND "${rout}" "    case: ${id}\n" at)
  if(NOT rrc EQUAL 1 OR at EQUAL -1 OR NOT rout MATCHES "replayed case:")
    message(FATAL_ERROR "--replay ${token} did not fail on case ${id} (exit ${rrc})\n${rout}${rerr}")
  endif()
endforeach()
message(STATUS "NOT FULLY SHRUNK after ${elapsed_ms} ms (budget ${budget} s); both replay lines replay their case")
