# The tree-sitter grammars, fetched from PyPI by scripts/fetch-grammars.sh into
# third_party/grammars/, compiled into one C library: engram_grammars. The runtime is Debian's
# libtree-sitter (ABI 13-14), so each parser.c must have LANGUAGE_VERSION 13 or 14. The headers the
# grammars include (tree_sitter/parser.h, alloc.h, array.h) are tree-sitter's own, in
# third_party/grammars/include.
set(ENGRAM_GRAMMAR_DIR ${PROJECT_SOURCE_DIR}/third_party/grammars)
set(ENGRAM_GRAMMAR_SOURCES)
if(NOT EXISTS ${ENGRAM_GRAMMAR_DIR}/include/tree_sitter/parser.h)
  message(FATAL_ERROR "engram: ${ENGRAM_GRAMMAR_DIR}/include/tree_sitter/parser.h is missing; run "
                      "scripts/fetch-grammars.sh (scripts/build.sh does)")
endif()
foreach(grammar tree-sitter-python tree-sitter-c tree-sitter-cpp)
  set(dir ${ENGRAM_GRAMMAR_DIR}/${grammar}/src)
  if(NOT EXISTS ${dir}/parser.c)
    message(FATAL_ERROR "engram: ${dir}/parser.c is missing; run scripts/fetch-grammars.sh "
                        "(scripts/build.sh does)")
  endif()
  file(STRINGS ${dir}/parser.c version_line REGEX "^#define LANGUAGE_VERSION [0-9]+")
  string(REGEX REPLACE ".* ([0-9]+)$" "\\1" version "${version_line}")
  if(NOT (version EQUAL 13 OR version EQUAL 14))
    message(FATAL_ERROR "engram: ${grammar} has LANGUAGE_VERSION ${version}; the tree-sitter "
                        "runtime takes 13 or 14 (see scripts/fetch-grammars.sh)")
  endif()
  list(APPEND ENGRAM_GRAMMAR_SOURCES ${dir}/parser.c)
  if(EXISTS ${dir}/scanner.c)
    list(APPEND ENGRAM_GRAMMAR_SOURCES ${dir}/scanner.c)
  endif()
  set_source_files_properties(${dir}/parser.c ${dir}/scanner.c PROPERTIES INCLUDE_DIRECTORIES
                              ${ENGRAM_GRAMMAR_DIR}/include)
endforeach()
add_library(engram_grammars STATIC ${ENGRAM_GRAMMAR_SOURCES})
set_target_properties(engram_grammars PROPERTIES C_STANDARD 11 POSITION_INDEPENDENT_CODE ON)
# Generated code: no warnings of ours, and sanitizers are for our code.
target_compile_options(engram_grammars PRIVATE -w -O2)
