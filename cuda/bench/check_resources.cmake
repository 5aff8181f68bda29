# Kernel resource check (ctest cuda.kernel_resources, label unit).
#
#   cmake -DCUOBJDUMP=/path/cuobjdump -DBINARY=libringkv_cuda.a [-DARCH=sm_90] [-DCXXFILT=c++filt]
#         -P check_resources.cmake
#
# Runs `cuobjdump --dump-resource-usage BINARY`, prints a table of registers, shared memory,
# stack frame and local memory per kernel of ARCH, and fails if
#   - BINARY holds no ARCH machine code, or no kernel whose name contains "decode" or "append"
#     (case-insensitive; so the check cannot pass vacuously), or
#   - any such kernel has STACK > 0 or LOCAL > 0 for ARCH. Register spills always go to the
#     stack frame, so STACK = 0 means no spills; a local array indexed at run time shows here too.
# Without cuobjdump (CUOBJDUMP empty or not found, and no $ENV{CUOBJDUMP}) it prints
# "kernel resource check SKIPPED" and the reason, which ctest reports as skipped.
cmake_minimum_required(VERSION 3.16)

if(NOT ARCH)
  set(ARCH sm_90)
endif()
if((NOT CUOBJDUMP OR CUOBJDUMP MATCHES "NOTFOUND$") AND DEFINED ENV{CUOBJDUMP})
  set(CUOBJDUMP "$ENV{CUOBJDUMP}")
endif()
if(NOT CUOBJDUMP OR CUOBJDUMP MATCHES "NOTFOUND$" OR NOT EXISTS "${CUOBJDUMP}")
  message("kernel resource check SKIPPED: no cuobjdump (not in the CUDA toolkit's bin/ at configure time; "
          "set CUOBJDUMP=/path/to/cuobjdump in the environment, or configure with -DRINGKV_CUOBJDUMP=...)")
  return()
endif()
if(NOT BINARY OR NOT EXISTS "${BINARY}")
  message(FATAL_ERROR "kernel resource check: no binary to read: '${BINARY}' (build ringkv_cuda first)")
endif()

execute_process(COMMAND "${CUOBJDUMP}" --dump-resource-usage "${BINARY}"
                OUTPUT_VARIABLE dump ERROR_VARIABLE dump_err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kernel resource check: ${CUOBJDUMP} --dump-resource-usage ${BINARY} failed (${rc}):\n${dump_err}")
endif()

# One list element per line; brackets and semicolons would confuse CMake's lists.
string(REPLACE "[" "(" dump "${dump}")
string(REPLACE "]" ")" dump "${dump}")
string(REPLACE ";" "," dump "${dump}")
string(REPLACE "\n" ";" lines "${dump}")

set(in_elf FALSE)
set(arch "")
set(seen_arch FALSE)
set(function "")
set(names "")
set(rows "")
set(checked 0)
set(bad "")
foreach(line IN LISTS lines)
  if(line MATCHES "^Fatbin elf code")
    set(in_elf TRUE)
    set(arch "")
  elseif(line MATCHES "^Fatbin ptx code")
    set(in_elf FALSE)
  elseif(in_elf AND line MATCHES "^arch = ([a-z0-9_]+)")
    set(arch "${CMAKE_MATCH_1}")
    if(arch STREQUAL ARCH)
      set(seen_arch TRUE)
    endif()
  elseif(in_elf AND arch STREQUAL ARCH AND line MATCHES "^ *Function ([^ ]+):$")
    set(function "${CMAKE_MATCH_1}")
  elseif(in_elf AND arch STREQUAL ARCH AND function AND line MATCHES "REG:([0-9]+) STACK:([0-9]+) SHARED:([0-9]+) LOCAL:([0-9]+)")
    set(reg ${CMAKE_MATCH_1})
    set(stack ${CMAKE_MATCH_2})
    set(shared ${CMAKE_MATCH_3})
    set(local ${CMAKE_MATCH_4})
    # The kernel's own name (demangled, without its parameter list) decides whether it is checked:
    # a parameter type such as DecodeParams must not make another kernel count.
    set(pretty "${function}")
    if(CXXFILT AND NOT CXXFILT MATCHES "NOTFOUND$")
      execute_process(COMMAND "${CXXFILT}" "${function}" OUTPUT_VARIABLE demangled OUTPUT_STRIP_TRAILING_WHITESPACE
                      RESULT_VARIABLE frc)
      if(frc EQUAL 0 AND demangled)
        set(pretty "${demangled}")
      endif()
    endif()
    string(REPLACE "(anonymous namespace)" "{anonymous}" own_name "${pretty}")
    string(REGEX REPLACE "\\(.*$" "" own_name "${own_name}")
    string(TOLOWER "${own_name}" lower)
    set(verdict "-    ")
    if(lower MATCHES "decode|append")
      math(EXPR checked "${checked} + 1")
      if(stack GREATER 0 OR local GREATER 0)
        set(verdict "FAIL ")
        list(APPEND bad "${pretty}: STACK ${stack} bytes, LOCAL ${local} bytes")
      else()
        set(verdict "ok   ")
      endif()
    endif()
    string(LENGTH "${pretty}" len)
    if(len GREATER 96)
      string(SUBSTRING "${pretty}" 0 93 pretty)
      set(pretty "${pretty}...")
    endif()
    # Fixed-width columns: registers, shared, stack, local, checked verdict, kernel.
    foreach(v reg shared stack local)
      string(LENGTH "${${v}}" n)
      set(pad "")
      while(n LESS 7)
        string(APPEND pad " ")
        math(EXPR n "${n} + 1")
      endwhile()
      set(${v}_col "${pad}${${v}}")
    endforeach()
    list(APPEND rows "${reg_col} ${shared_col} ${stack_col} ${local_col}  ${verdict}  ${pretty}")
    set(function "")
  endif()
endforeach()

message("kernel resources, ${ARCH}, ${BINARY}:")
message("    REG  SHARED   STACK   LOCAL  check  kernel")
foreach(r IN LISTS rows)
  message("${r}")
endforeach()
message("(check: kernels whose name contains \"decode\" or \"append\" must have STACK = 0 and LOCAL = 0, i.e. no spills)")

if(NOT seen_arch)
  message(FATAL_ERROR "kernel resource check: ${BINARY} holds no ${ARCH} machine code "
                      "(RINGKV_CUDA_ARCHITECTURES must include 90)")
endif()
if(checked EQUAL 0)
  message(FATAL_ERROR "kernel resource check: no ${ARCH} kernel whose name contains \"decode\" or \"append\" "
                      "in ${BINARY}: the check would pass vacuously")
endif()
if(bad)
  string(REPLACE ";" "\n  " bad_text "${bad}")
  message(FATAL_ERROR "kernel resource check: ${ARCH} kernels with spills or local memory:\n  ${bad_text}")
endif()
message("kernel resource check passed: ${checked} decode/append kernels on ${ARCH} without spills or local memory")
