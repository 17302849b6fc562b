# Fuzz targets: one declaration gives a corpus replay test (any compiler) and, where the compiler
# has libFuzzer (clang: -fsanitize=fuzzer), a fuzzer. fuzz/fuzz_target.h states the contract an
# entry point follows; scripts/fuzz.sh builds and runs the fuzzers.
#
#   rm_add_fuzz_target(NAME
#     ENTRY   file.cc      the entry point (defines rm::fuzz::run_fuzz_input, LLVMFuzzerTestOneInput)
#     CORPUS  dir          its seed corpus, fuzz/corpora/<input>/: valid_*, bad_*, regression_* files and a README.md
#     MAX_LEN bytes        the fuzzer's -max_len; every seed must fit (the replay test checks)
#     LIBS    targets...   the code under test and what it needs
#     [TESTS  files...])   more GoogleTest sources for the replay test, if the target has any
#
# Always: the GoogleTest executable NAME_corpus_test, an ordinary build of the entry point with
# fuzz/corpus_replay_test.cc (and TESTS) replaying CORPUS; its CTest names start with "NAME.", so
# `ctest -R '_fuzz\.'` runs every replay.
# With libFuzzer: also the fuzzer build/fuzz/NAME (-fsanitize=fuzzer,address,undefined), built
# by the target `fuzz_targets` and not by `all`, and a line "NAME<TAB>CORPUS<TAB>MAX_LEN" in
# build/fuzz/targets.tsv for scripts/fuzz.sh. The project's static libraries in LIBS are rebuilt
# for the fuzzers (once, as LIB_fuzz) with coverage and sanitizers, so that bugs inside them are
# found and not only at their boundary; other libraries (yaml-cpp, ...) are linked as they are.

include_guard(GLOBAL)
include(CheckCXXSourceCompiles)

set(RM_FUZZ_SUPPORT_DIR ${CMAKE_CURRENT_LIST_DIR}/../fuzz)
# UBSan reports abort instead of printing and going on, so libFuzzer sees them as crashes.
set(RM_FUZZ_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
    -g)

set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,address,undefined")
check_cxx_source_compiles([[
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }
]] RM_HAVE_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)
message(STATUS "Ringmaster: libFuzzer=${RM_HAVE_LIBFUZZER}")

if(RM_HAVE_LIBFUZZER)
  set(RM_FUZZ_DIR ${CMAKE_BINARY_DIR}/fuzz)
  file(WRITE ${RM_FUZZ_DIR}/targets.tsv "")  # filled by rm_add_fuzz_target at configure time
  add_custom_target(fuzz_targets)
endif()

# The instrumented twin of a project static library: same sources, include directories,
# definitions and links (project static libraries among them replaced by their twins).
function(_rm_fuzz_library lib out_var)
  get_target_property(type ${lib} TYPE)
  get_target_property(imported ${lib} IMPORTED)
  if(NOT type STREQUAL "STATIC_LIBRARY" OR imported)
    set(${out_var} ${lib} PARENT_SCOPE)
    return()
  endif()
  set(twin ${lib}_fuzz)
  if(NOT TARGET ${twin})
    get_target_property(sources ${lib} SOURCES)
    get_target_property(dir ${lib} SOURCE_DIR)
    set(absolute "")
    foreach(s IN LISTS sources)
      cmake_path(ABSOLUTE_PATH s BASE_DIRECTORY ${dir})
      list(APPEND absolute ${s})
    endforeach()
    add_library(${twin} STATIC EXCLUDE_FROM_ALL ${absolute})
    target_compile_options(${twin} PRIVATE -fsanitize=fuzzer-no-link ${RM_FUZZ_FLAGS})
    foreach(prop INCLUDE_DIRECTORIES INTERFACE_INCLUDE_DIRECTORIES COMPILE_DEFINITIONS
                 INTERFACE_COMPILE_DEFINITIONS)
      get_target_property(value ${lib} ${prop})
      if(value)
        set_property(TARGET ${twin} PROPERTY ${prop} ${value})
      endif()
    endforeach()
    get_target_property(deps ${lib} LINK_LIBRARIES)
    if(deps)
      foreach(dep IN LISTS deps)
        if(TARGET ${dep})
          _rm_fuzz_library(${dep} dep)
        endif()
        target_link_libraries(${twin} PUBLIC ${dep})
      endforeach()
    endif()
  endif()
  set(${out_var} ${twin} PARENT_SCOPE)
endfunction()

function(rm_add_fuzz_target name)
  cmake_parse_arguments(PARSE_ARGV 1 F "" "ENTRY;CORPUS;MAX_LEN" "LIBS;TESTS")
  if(NOT F_ENTRY OR NOT F_CORPUS OR NOT F_MAX_LEN OR NOT F_LIBS)
    message(FATAL_ERROR "rm_add_fuzz_target(${name}): ENTRY, CORPUS, MAX_LEN and LIBS are required")
  endif()
  cmake_path(ABSOLUTE_PATH F_CORPUS BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  set(support ${RM_FUZZ_SUPPORT_DIR}/scratch_dir.cc)

  add_executable(${name}_corpus_test ${F_ENTRY} ${support} ${RM_FUZZ_SUPPORT_DIR}/corpus_replay_test.cc
    ${F_TESTS})
  target_link_libraries(${name}_corpus_test PRIVATE ${F_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name}_corpus_test PRIVATE RM_FUZZ_NAME="${name}"
    RM_FUZZ_CORPUS_DIR="${F_CORPUS}" RM_FUZZ_MAX_LEN=${F_MAX_LEN})
  # A seed that once hung must fail the test run, not stall it.
  gtest_discover_tests(${name}_corpus_test TEST_PREFIX "${name}." DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 300)

  if(NOT RM_HAVE_LIBFUZZER)
    return()
  endif()
  set(libs "")
  foreach(lib IN LISTS F_LIBS)
    if(TARGET ${lib})
      _rm_fuzz_library(${lib} lib)
    endif()
    list(APPEND libs ${lib})
  endforeach()
  add_executable(${name} EXCLUDE_FROM_ALL ${F_ENTRY} ${support})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer ${RM_FUZZ_FLAGS})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer ${RM_FUZZ_FLAGS})
  target_link_libraries(${name} PRIVATE ${libs})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${RM_FUZZ_DIR})
  add_dependencies(fuzz_targets ${name})
  file(APPEND ${RM_FUZZ_DIR}/targets.tsv "${name}\t${F_CORPUS}\t${F_MAX_LEN}\n")
endfunction()
