# Malformed input through `ringkv check` (issue 11; the readers' messages are the table of
# conformance/golden/malformed_input_test.cpp, docs/reliability.md "Malformed input"). A copy of
# three small golden cases; in each run one input is malformed and the others are still checked:
#   1. a case whose config has W = 0, its manifest hash updated so that the reader's error shows:
#      that case is an ERROR naming the file and the field, the other two pass, exit code 2;
#   2. the same file with the manifest's size and hash left as they were: the mismatch is the error;
#   3. a manifest naming a file that is not there: that case is an ERROR, the others pass, exit 2;
#   4. a manifest listing a case twice: the manifest is unusable, exit 2, nothing is judged;
#   5. --profile with an unknown field: exit 2 naming the file and the field;
#   6. --outputs with one outputs file of the wrong shape: that case FAILS (the engine's file) naming
#      the file, the tensor and the shape expected, the others pass, exit 1.
# (A byte flipped in tensor data, JUnit and JSON: corrupt_golden.cmake.)
#   cmake -DRINGKV=ringkv -DFIXTURE=ringkv_outputs_fixture -DGOLDEN=golden -DWORK=dir -DPYTHON=python3
#         -P malformed_inputs.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(cases window_1 kv_f16 decode_w8)
# Edits of safetensors headers and manifests, independent of the C++ readers.
file(WRITE ${WORK}/edit.py "import sys\nsys.path.insert(0, '${CMAKE_CURRENT_LIST_DIR}')\n" [=[
import hashlib, json
from st_header import read_st, write_st

action, path = sys.argv[1], sys.argv[2]
if action == 'subset':            # manifest.json: keep the named cases only
    m = json.load(open(path))
    m['cases'] = [c for c in m['cases'] if c['name'] in sys.argv[3:]]
    json.dump(m, open(path, 'w'), indent=2)
elif action == 'window0':         # a case file: layer 0's window = 0
    h, buf = read_st(path)
    c = json.loads(h['__metadata__']['case'])
    c['config']['layers'][0]['window'] = 0
    h['__metadata__']['case'] = json.dumps(c, separators=(',', ':'), sort_keys=True)
    write_st(path, h, buf)
elif action == 'rehash':          # manifest.json NAME FILE: the entry's sha256 and bytes of FILE
    m = json.load(open(path))
    data = open(sys.argv[4], 'rb').read()
    for c in m['cases']:
        if c['name'] == sys.argv[3]:
            c['sha256'], c['bytes'] = hashlib.sha256(data).hexdigest(), len(data)
    json.dump(m, open(path, 'w'), indent=2)
elif action == 'twice':           # manifest.json NAME: the entry listed twice
    m = json.load(open(path))
    m['cases'] += [c for c in m['cases'] if c['name'] == sys.argv[3]]
    json.dump(m, open(path, 'w'), indent=2)
elif action == 'out_shape':       # an outputs file: 'out' [L, R, Hq, D] as [L, R, 2 Hq, D / 2]
    h, buf = read_st(path)
    s = h['out']['shape']
    h['out']['shape'] = [s[0], s[1], 2 * s[2], s[3] // 2]
    write_st(path, h, buf)
]=])

function(edit)
  execute_process(COMMAND ${PYTHON} ${WORK}/edit.py ${ARGN} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "edit.py ${ARGN}: ${rc}\n${err}")
  endif()
endfunction()

# A golden set of the three cases in DIR.
function(copy_set dir)
  file(MAKE_DIRECTORY ${dir}/cases)
  file(COPY ${GOLDEN}/manifest.json DESTINATION ${dir})
  foreach(c IN LISTS cases)
    file(COPY ${GOLDEN}/cases/${c}.safetensors DESTINATION ${dir}/cases)
  endforeach()
  edit(subset ${dir}/manifest.json ${cases})
endfunction()

include(${CMAKE_CURRENT_LIST_DIR}/check_function.cmake)

# --filter: a run over part of the set requires no class (the coverage verdict is not the point here).
set(run check --engine reference --filter "^")

# 1. W = 0, hash updated: the reader's error, as an unusable golden case; the other two still pass.
copy_set(${WORK}/rehashed)
edit(window0 ${WORK}/rehashed/cases/window_1.safetensors)
edit(rehash ${WORK}/rehashed/manifest.json window_1 ${WORK}/rehashed/cases/window_1.safetensors)
check(reader_error_with_hash_updated 2
      "ERROR window_1 \\(engine reference not judged on it\\)\n  unusable golden case: [^\n]*rehashed/cases/window_1.safetensors: __metadata__ 'case' is not a valid case: case.config.layers\\[0\\].window = 0: must be in \\[1, 2\\^31 - 1\\]; no verdict on the engine.*ERROR: 2 passed, 0 failed, 0 xfail, 0 skipped golden cases, 1 unusable golden file"
      "FAILED" ${run} --golden ${WORK}/rehashed)

# 2. The same file, the manifest's hash left as it was: the mismatch is what is reported.
copy_set(${WORK}/stale_hash)
file(COPY ${WORK}/rehashed/cases/window_1.safetensors DESTINATION ${WORK}/stale_hash/cases)
check(reader_error_with_stale_hash 2
      "ERROR window_1 \\(engine reference not judged on it\\)\n  unusable golden case: [^\n]*stale_hash/cases/window_1.safetensors has (sha256 [0-9a-f]+|[0-9]+ bytes), its manifest says [0-9a-f]+ \\(the file is corrupt or not the one listed\\).*ERROR: 2 passed, 0 failed, 0 xfail, 0 skipped golden cases, 1 unusable golden file"
      "FAILED|window = 0" ${run} --golden ${WORK}/stale_hash)

# 3. The manifest names a file that is not there.
copy_set(${WORK}/missing_file)
file(REMOVE ${WORK}/missing_file/cases/kv_f16.safetensors)
check(manifest_names_a_missing_file 2
      "ERROR kv_f16 \\(engine reference not judged on it\\)\n  unusable golden case: [^\n]*missing_file/cases/kv_f16.safetensors: cannot open for reading \\(manifest.json: the file of case kv_f16\\).*ERROR: 2 passed, 0 failed, 0 xfail, 0 skipped golden cases, 1 unusable golden file"
      "FAILED" ${run} --golden ${WORK}/missing_file)

# 4. The manifest lists a case twice: the manifest itself is unusable.
copy_set(${WORK}/twice)
edit(twice ${WORK}/twice/manifest.json kv_f16)
check(manifest_lists_a_case_twice 2
      "twice/manifest.json: cases\\[3\\].name = \"kv_f16\": listed twice \\(also cases\\[[0-2]\\]\\); each case is listed once"
      "PASSED|FAILED" ${run} --golden ${WORK}/twice)

# 5. A profile file with an unknown field.
file(READ ${GOLDEN}/../profiles/f32-reference.json profile)
string(REPLACE "\"q_dot\"" "\"colour\": \"red\", \"q_dot\"" profile "${profile}")
file(WRITE ${WORK}/bad_profile.json "${profile}")
check(profile_with_an_unknown_field 2
      "--profile: [^\n]*bad_profile.json: profile.colour: unknown field; a profile has q_dot, q_quant"
      "PASSED|FAILED" ${run} --golden ${WORK}/rehashed --profile ${WORK}/bad_profile.json)

# 6. An outputs file of the wrong shape: the engine's file, so that case fails; the others pass.
copy_set(${WORK}/outputs_set)
execute_process(COMMAND ${FIXTURE} ${WORK}/outputs_set ${WORK}/outputs stored RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the outputs fixture: ${rc}\n${err}")
endif()
edit(out_shape ${WORK}/outputs/window_1.safetensors)
check(outputs_file_of_the_wrong_shape 1
      "FAILED window_1 [^\n]*\n.*outputs/window_1.safetensors: tensor 'out' has shape \\[2, 7, 4, 8\\], expected \\[2, 7, 2, 16\\].*FAILED: 2 passed, 1 failed"
      "ERROR" check --golden ${WORK}/outputs_set --outputs ${WORK}/outputs --filter "^")
