# Scale cases for engines reached through files (docs/scale.md "Scale cases in files"), on the
# smallest case of the ci tier (gqa32x8_d256_b8_fp8_softcap: 845 rows, 42 MB of inputs):
#   1. `ringkv golden generate --scale ci --filter ...` writes that case only, named scale_ci_<shape>,
#      with __metadata__ scale_case and sample_every and no expected outputs, and a manifest whose
#      generator regenerates it (`ringkv golden verify`);
#   2. the reference's outputs of its inputs (ringkv_outputs_fixture engine:reference) pass
#      `ringkv check --outputs DIR --scale ci --no-golden`;
#   3. a mutant's (gqa_modulo: q head h reads kv head h % Hkv) fail;
#   4. an outputs file with rows missing ('out' one row short), a truncated file and another case's
#      file each fail that case (the engine's file), naming the file and the field; no file fails;
#   5. --golden on a scale set, an unknown tier and a --filter that keeps nothing exit 2.
#   cmake -DRINGKV=ringkv -DFIXTURE=ringkv_outputs_fixture -DGOLDEN=golden -DWORK=dir -DPYTHON=python3
#         -P scale_outputs.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(shape gqa32x8_d256_b8_fp8_softcap)
set(file scale_ci_${shape}.safetensors)

include(${CMAKE_CURRENT_LIST_DIR}/check_function.cmake)

function(fixture golden out mode)
  execute_process(COMMAND ${FIXTURE} ${golden} ${out} ${mode} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the outputs fixture ${mode}: ${rc}\n${err}")
  endif()
endfunction()

# 1. The inputs of one scale case, in golden format.
check(generate_one_scale_case 0 "wrote the scale cases of tier ci to" ""
      golden generate --scale ci --filter ${shape} --out ${WORK}/gold)
file(GLOB written RELATIVE ${WORK}/gold/cases ${WORK}/gold/cases/*)
if(NOT written STREQUAL "${file}")
  message(FATAL_ERROR "generate --scale ci --filter ${shape} wrote [${written}], expected [${file}]")
endif()
file(READ ${WORK}/gold/manifest.json manifest)
string(JSON generator GET "${manifest}" generator)
string(JSON n LENGTH "${manifest}" cases)
string(JSON name GET "${manifest}" cases 0 name)
if(NOT n EQUAL 1 OR NOT name STREQUAL "scale_ci_${shape}" OR NOT generator MATCHES "\"scale\" *: *\"ci\"")
  message(FATAL_ERROR "manifest: ${n} cases, the first ${name}, generator ${generator}")
endif()
execute_process(COMMAND ${PYTHON} -c "import struct, sys; f = open(sys.argv[1], 'rb'); print(f.read(struct.unpack('<Q', f.read(8))[0]).decode())"
                ${WORK}/gold/cases/${file} OUTPUT_VARIABLE header RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cannot read the header of ${file}")
endif()
foreach(want "\"scale_case\":\"scale/ci/${shape}\"" "\"sample_every\":\"32\"" "\"q\":{" "\"v\":{")
  string(FIND "${header}" "${want}" at)
  if(at LESS 0)
    message(FATAL_ERROR "${file}: the header has no ${want}")
  endif()
endforeach()
foreach(unwanted "\"expected\"" "\"expected_f64\"" "\"score." "\"dim." "\"k_stored\"")
  string(FIND "${header}" "${unwanted}" at)
  if(at GREATER -1)
    message(FATAL_ERROR "${file}: a scale case holds no ${unwanted}")
  endif()
endforeach()
check(verify_scale_set 0 "golden set verified" "MISMATCH" golden verify ${WORK}/gold)

set(run check --quiet --scale ci --no-golden --filter ${shape})
# 2. The reference's outputs pass, judged on the sampled rows.
fixture(${WORK}/gold ${WORK}/reference engine:reference)
check(reference_outputs_pass 0
      "engine outputs:[^\n]*reference: PASSED, 1 scale cases \\(tier ci\\): 1 passed, 0 failed"
      "FAILED|ERROR" ${run} --outputs ${WORK}/reference)

# 3. A mutant's fail at the first sampled row, with the command that reproduces it.
fixture(${WORK}/gold ${WORK}/mutant engine:gqa_modulo)
check(mutant_outputs_fail 1
      "FAILED scale/ci/${shape} \\[failed\\][^\n]*\n.*step 0, sequence 0, token 0 [^\n]*> bound.*reproduce: ringkv golden generate --scale ci --out SCALE_DIR[^\n]*\n  then: ringkv check --outputs [^\n]* --scale ci --no-golden --filter '\\^scale/ci/${shape} '"
      "PASSED" ${run} --outputs ${WORK}/mutant)

# 4. Malformed outputs files: the engine's, so its case fails, naming the file and the field.
file(WRITE ${WORK}/edit.py "import sys\nsys.path.insert(0, '${CMAKE_CURRENT_LIST_DIR}')\n" [=[
from st_header import read_st, write_st

action, path = sys.argv[1], sys.argv[2]
h, buf = read_st(path)
if action == 'drop_row':          # 'out' [L, R, Hq, D] with its last row missing
    s, (b, e) = h['out']['shape'], h['out']['data_offsets']
    row = 4 * s[2] * s[3]
    h['out']['shape'] = [s[0], s[1] - 1, s[2], s[3]]
    h['out']['data_offsets'] = [b, e - row]
    for t in h.values():          # the tensors after it move down by one row
        if isinstance(t, dict) and 'data_offsets' in t and t['data_offsets'][0] >= e:
            t['data_offsets'] = [t['data_offsets'][0] - row, t['data_offsets'][1] - row]
    write_st(path, h, buf[:e - row] + buf[e:])
elif action == 'truncate':        # the last half of the buffer cut off
    write_st(path, h, buf[:len(buf) // 2])
elif action == 'other_case':      # the id of another case
    h['__metadata__']['id'] = 'L=1[W8S0:neox:th10000:R32]/Hq=4/Hkv=2/D=32/seed=101'
    write_st(path, h, buf)
]=])
foreach(action drop_row truncate other_case)
  file(REMOVE_RECURSE ${WORK}/${action})
  file(COPY ${WORK}/reference/ DESTINATION ${WORK}/${action})
  execute_process(COMMAND ${PYTHON} ${WORK}/edit.py ${action} ${WORK}/${action}/${file} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "edit.py ${action}: ${rc}\n${err}")
  endif()
endforeach()
check(outputs_with_a_row_missing_fail 1
      "FAILED scale/ci/${shape} [^\n]*\n.*drop_row/${file}: tensor 'out' has shape \\[1, 844, 32, 256\\], expected \\[1, 845, 32, 256\\]"
      "PASSED|ERROR" ${run} --outputs ${WORK}/drop_row)
check(truncated_outputs_fail 1 "FAILED scale/ci/${shape} [^\n]*\n.*truncate/${file}: [^\n]*(truncated|beyond|offsets)"
      "PASSED|ERROR" ${run} --outputs ${WORK}/truncate)
check(outputs_of_another_case_fail 1
      "FAILED scale/ci/${shape} [^\n]*\n.*other_case/${file}: outputs are for case \"L=1\\[W8S0[^\n]*, not for scale_ci_${shape}"
      "PASSED|ERROR" ${run} --outputs ${WORK}/other_case)
file(REMOVE ${WORK}/other_case/${file})
check(no_outputs_file_fails 1 "no outputs file [^\n]*other_case/${file} \\(the case is within the capabilities"
      "PASSED" ${run} --outputs ${WORK}/other_case)

# 5. What the user gave is wrong: exit 2, naming it.
check(golden_on_a_scale_set_exits_2 2 "--golden [^\n]*gold is a set of scale cases \\(`ringkv golden generate --scale ci --filter '${shape}' --out [^\n]*`\\): they hold no expected outputs; judge an engine's outputs of them with `ringkv check --outputs DIR --scale TIER --no-golden`"
      "PASSED|FAILED" check --quiet --outputs ${WORK}/reference --golden ${WORK}/gold)
check(generate_unknown_tier_exits_2 2 "--scale: \"huge\" is not a tier; the tiers are ci, host, gpu, gpu-long" ""
      golden generate --scale huge --out ${WORK}/huge)
check(generate_filter_keeping_nothing_exits_2 2 "--filter \"nothing\": no scale case of tier ci matches" ""
      golden generate --scale ci --filter nothing --out ${WORK}/nothing)
