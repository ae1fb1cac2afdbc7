# Unpacks the xz-compressed oracle goldens (tests/golden/{model,processor}/**/*.safetensors.xz) next to
# themselves at configure time, so the tests and tools/reference read plain .safetensors files. The unpacked
# files are git-ignored; one is rewritten whenever its .xz is newer (a pull, a new golden). The goldens are
# stored compressed to keep the repository small (the device calls' 64 MiB working-tree limit).
file(GLOB_RECURSE TF_GOLDEN_XZ CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/tests/golden/model/*.safetensors.xz
     ${PROJECT_SOURCE_DIR}/tests/golden/processor/*.safetensors.xz)
if(TF_GOLDEN_XZ)
  find_program(TF_XZ xz)
  if(NOT TF_XZ)
    message(FATAL_ERROR "xz not found: the test goldens are xz-compressed (apt-get install xz-utils)")
  endif()
endif()
set(_unpacked 0)
foreach(z IN LISTS TF_GOLDEN_XZ)
  string(REGEX REPLACE "\\.xz$" "" raw "${z}")
  if(NOT EXISTS "${raw}" OR "${z}" IS_NEWER_THAN "${raw}")
    execute_process(COMMAND ${TF_XZ} -dc "${z}" OUTPUT_FILE "${raw}.part" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      file(REMOVE "${raw}.part")
      message(FATAL_ERROR "could not unpack ${z} (xz exit ${rc})")
    endif()
    file(RENAME "${raw}.part" "${raw}")
    math(EXPR _unpacked "${_unpacked} + 1")
  endif()
endforeach()
list(LENGTH TF_GOLDEN_XZ _n)
message(STATUS "test goldens: ${_n} compressed, ${_unpacked} unpacked now")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TF_GOLDEN_XZ})
