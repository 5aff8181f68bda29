# ---- `ringkv check --outputs` (file exchange, docs/golden-format.md §7): the profile of each file,
# cases declared unsupported, a missing file, the stored cache, RoPE checked apart; and the RoPE line of
# an ABI engine that ringkv rotates for. Included from cli/CMakeLists.txt.
set(_outputs_tests_dir ${CMAKE_CURRENT_LIST_DIR})
set(_outputs_work ${CMAKE_CURRENT_BINARY_DIR}/outputs-tests)
add_executable(ringkv_outputs_fixture ${_outputs_tests_dir}/outputs_fixture.cpp)
target_link_libraries(ringkv_outputs_fixture PRIVATE ringkv_golden ringkv_build_flags ringkv_exact_fp)
file(WRITE ${_outputs_work}/f16.json
     "{\"q_dot\":\"f16\",\"accumulator\":\"f32\",\"p_before_pv\":\"f16\",\"output\":\"f16\",\"rope_angle\":\"f64\"}\n")
file(WRITE ${_outputs_work}/f32.json
     "{\"q_dot\":\"f32\",\"accumulator\":\"f32\",\"p_before_pv\":\"f32\",\"output\":\"f32\",\"rope_angle\":\"f64\"}\n")

# ringkv_outputs_check(NAME n MODE fixture-mode RC rc [MATCH re] [REJECT re] [JSON_MATCH re] [JUNIT_MATCH re]
#                      [ARGS extra ringkv args])
function(ringkv_outputs_check)
  cmake_parse_arguments(T "" "NAME;MODE;RC;MATCH;REJECT;JSON_MATCH;JUNIT_MATCH" "ARGS" ${ARGN})
  set(dir ${_outputs_work}/${T_NAME})
  add_test(NAME cli.outputs_${T_NAME}
           COMMAND ${CMAKE_COMMAND}
                   "-DFIXTURE=$<TARGET_FILE:ringkv_outputs_fixture>;${PROJECT_SOURCE_DIR}/golden;${dir}/out;${T_MODE}"
                   "-DCMD=$<TARGET_FILE:ringkv>;check;--quiet;--golden;${PROJECT_SOURCE_DIR}/golden;--outputs;${dir}/out;--json;${dir}/report.json;--junit;${dir}/report.xml;${T_ARGS}"
                   -DEXPECT_RC=${T_RC} "-DEXPECT_REGEX=${T_MATCH}" "-DREJECT_REGEX=${T_REJECT}" "-DJSON=${dir}/report.json"
                   "-DJSON_REGEX=${T_JSON_MATCH}" "-DJUNIT=${dir}/report.xml" "-DJUNIT_REGEX=${T_JUNIT_MATCH}"
                   -P ${_outputs_tests_dir}/outputs_check.cmake)
  set_tests_properties(cli.outputs_${T_NAME} PROPERTIES LABELS golden TIMEOUT 300)
endfunction()

# The profile in each file's metadata is the one used (issue 9's defect: it was ignored); --profile is
# the default for files without one; the reproduce line and the JSON report say which and whence.
ringkv_outputs_check(NAME profile_in_file_is_used MODE f16-in-file RC 0 MATCH "PASSED"
                     JSON_MATCH "\"profile_source\": \"the outputs file's metadata\"")
ringkv_outputs_check(NAME profile_default_when_file_has_none MODE f16-no-profile RC 1
                     MATCH "FAILED decode_w8 [^\n]*\n.*reproduce: ringkv check --outputs [^\n]* --filter '\\^decode_w8 '  # profile {[^\n]*\"output\":\"f32\"[^\n]*} from the default \\(no --profile\\)"
                     JSON_MATCH "\"profile_source\": \"the default \\(no --profile\\)\""
                     ARGS --filter "^decode_w8 ")
ringkv_outputs_check(NAME profile_flag_is_the_default MODE f16-no-profile RC 0 MATCH "PASSED"
                     JSON_MATCH "\"profile_source\": \"--profile [^\"]*f16.json\"" ARGS --profile ${_outputs_work}/f16.json)
ringkv_outputs_check(NAME profile_flag_in_reproduce MODE f16-no-profile RC 1
                     MATCH "reproduce: ringkv check --outputs [^\n]* --profile '[^']*f32.json'  # profile {[^\n]*} from --profile [^\n]*f32.json"
                     ARGS --profile ${_outputs_work}/f32.json)
ringkv_outputs_check(NAME profile_in_file_wins_over_flag MODE f16-in-file RC 0 MATCH "PASSED"
                     ARGS --profile ${_outputs_work}/f32.json)
# --profile also takes a name from profiles/ (issue 9's named profiles); an unknown name lists them.
ringkv_outputs_check(NAME profile_flag_takes_a_name MODE f16-no-profile RC 0 MATCH "PASSED"
                     ARGS --profile f16-compute-f32-acc)
ringkv_outputs_check(NAME profile_flag_unknown_name MODE f16-no-profile RC 2
                     MATCH "--profile: profile .f16-everything.: not a file and not a named profile[^\n]*f16-pv-accumulation"
                     ARGS --profile f16-everything)
# A case declared unsupported is skipped, not failed, and judges nothing: a class it alone carried is
# not judged (a feature here, so the default requirement holds), and --require-classes makes it fail.
ringkv_outputs_check(NAME unsupported_is_skipped MODE unsupported RC 0 MATCH "PASSED: [0-9]+ passed, 0 failed, 0 xfail, [1-9][0-9]* skipped"
                     JSON_MATCH "\"detail\": \"unsupported \\(outputs file\\): no q8_0 KV cache in this engine\"")
ringkv_outputs_check(NAME unsupported_class_required_fails MODE unsupported RC 1
                     MATCH "1 required class\\(es\\) not judged \\(--require-classes int8-q8_0\\):\n    int8-q8_0 \\(no case within the capabilities was compared\\)"
                     ARGS --require-classes int8-q8_0)
# A structural class left unjudged fails a run without --filter (the default requirement), in the
# table, the JSON and the JUnit report; a filtered run requires nothing.
ringkv_outputs_check(NAME unjudged_structural_class_fails MODE unsupported-needles RC 1
                     MATCH "needle-W\\+1 +core [^\n]* not judged\n.*required class\\(es\\) not judged \\(default: the structural classes within its capabilities\\):\n(    [^\n]*\n)*    needle-W\\+1 \\(no case"
                     JSON_MATCH "\"class\": \"needle-W\\+1\",[^}]*\"status\": \"not judged\""
                     JUNIT_MATCH "<testcase classname=\"coverage\" name=\"needle-W\\+1\"><failure message=\"required class not judged: not judged; to judge it: declare the capability in the engine's capabilities file[^\"]*\"/>"
                     ARGS --table)
ringkv_outputs_check(NAME unjudged_class_filtered_run_passes MODE unsupported-needles RC 0 MATCH "PASSED"
                     ARGS --filter "^")
# A capabilities file (golden-format §10): spec 1 core with f32 K/V. Cases outside it need no file and
# are not applicable; the engine is judged on every structural class (none is left "not judged").
ringkv_outputs_check(NAME core_capabilities_judged_on_every_class MODE core-f32-caps RC 0
                     MATCH "capabilities: [^\n]*capabilities.json\n.*t=W\\+1 +core +[1-9][0-9]* +0 [^\n]*judged\n.*sinks +feature +0 +0 +0 +[1-9][0-9]* +0 [^\n]*not applicable \\(no sink tokens\\)\n([^\n]*\n)*  coverage of outputs:[^\n]*: core [0-9]+ of [0-9]+ classes judged; features 0 of 0 judged; n/a: sinks"
                     REJECT "not judged:|FAILED"
                     JSON_MATCH "\"missing\": \\[\\]"
                     JUNIT_MATCH "<testcase classname=\"coverage\" name=\"t=W\\+1\"></testcase>.*<testcase classname=\"coverage\" name=\"sinks\"><skipped message=\"not applicable: no sink tokens\"/>"
                     ARGS --table)
ringkv_outputs_check(NAME core_capabilities_missing_file_fails MODE core-f32-caps-missing RC 1
                     MATCH "no outputs file [^\n]* \\(the case is within the capabilities in [^\n]*capabilities.json\\)")
file(WRITE ${_outputs_work}/bad_caps.json "{\"level\": \"core\", \"max_batchh\": 1}\n")
ringkv_outputs_check(NAME bad_capabilities_file_exits_2 MODE missing RC 2
                     MATCH "--capabilities: capabilities file [^\n]*bad_caps.json: capabilities.max_batchh: unknown field; a capabilities file has"
                     ARGS --capabilities ${_outputs_work}/bad_caps.json)
# A missing file still fails.
ringkv_outputs_check(NAME missing_file_fails MODE missing RC 1 MATCH "FAILED decode_w8 [^\n]*\n[^\n]*\n[^\n]*\n  no outputs file")
# The stored cache, checked as a snapshot is (golden-format §6).
ringkv_outputs_check(NAME stored_cache_passes MODE stored RC 0 MATCH "PASSED")
ringkv_outputs_check(NAME stored_cache_wrong_code_fails MODE stored-bad RC 1
                     MATCH "FAILED int8_per_head [^\n]*\n.*stored cache, layer 0[^\n]* V code\\[head [0-9]+\\]\\[dim [0-9]+\\] is")
# Rotated q and k: the RoPE verdict line per case, in the report and the JSON.
ringkv_outputs_check(NAME rotated_qk_verdict MODE rotated RC 0
                     MATCH "RoPE, checked apart from attention:\n(  [^\n]*\n)*  decode_w8 +RoPE conformant \\(f64 rotation of spec §8\\): worst angle-equivalent error"
                     JSON_MATCH "\"verdict\": \"conformant\""
                     ARGS --table)

# Through the ABI: an engine with wants_rotated_qk gets the line saying ringkv rotated.
if(TARGET ringkv_plugin_rotated_qk)
  ringkv_cli_check(NAME plugin_rotated_qk_rope_line RC 0
                   MATCH "RoPE rotated by ringkv \\(wants_rotated_qk: spec §8 in f64\\): attention judged tightly.*PASSED"
                   ARGS check --quiet --filter "pos_2p2|decode_w8" --engine $<TARGET_FILE:ringkv_plugin_rotated_qk>)
  ringkv_cli_check(NAME plugin_reference_no_rope_line RC 0 MATCH "PASSED" REJECT "RoPE rotated by ringkv"
                   ARGS check --quiet --filter "pos_2p2|decode_w8" --engine $<TARGET_FILE:ringkv_plugin_reference>)
endif()

# Issue 14's "done when": the two core controls, run through the file exchange with their capabilities
# file, pass and are judged on every class they can express (none is left "not judged").
foreach(control core_f32_engine core_bf16_engine)
  ringkv_outputs_check(NAME ${control}_judged_on_every_class MODE engine:${control} RC 0
                       MATCH "coverage of outputs:[^\n]*: core [0-9]+ of [0-9]+ classes judged; features 0 of 0 judged; n/a: "
                       REJECT "not judged:|FAILED"
                       JSON_MATCH "\"missing\": \\[\\]")
endforeach()
