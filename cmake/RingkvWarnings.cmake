# Warning and numerics flags shared by every ringkv target.
add_library(ringkv_build_flags INTERFACE)
add_library(ringkv::build_flags ALIAS ringkv_build_flags)
target_compile_options(ringkv_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
  # GCC 12 reports false -Wrestrict positives on std::string concatenation at -O3.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${RINGKV_WERROR}>>:-Werror>)
if(RINGKV_SANITIZE)
  target_compile_options(ringkv_build_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer>)
  target_link_options(ringkv_build_flags INTERFACE -fsanitize=address,undefined,float-cast-overflow)
endif()

# Results of the reference and the oracle must not depend on the compiler's
# choice to fuse a*b+c: no FMA contraction, never fast-math (docs/spec.md §8).
add_library(ringkv_exact_fp INTERFACE)
add_library(ringkv::exact_fp ALIAS ringkv_exact_fp)
target_compile_options(ringkv_exact_fp INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off -fno-fast-math>)
