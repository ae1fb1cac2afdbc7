# Unpacks the xz-compressed oracle goldens (tests/golden/{model,processor}/**/*.safetensors.xz) next to
# themselves at configure time, so the tests and tools/reference read plain .safetensors files. The unpacked
# files are git-ignored; one is rewritten whenever its .xz is newer (a pull, a new golden). The goldens are
# stored compressed to keep the repository small (the device calls' 64 MiB working-tree limit).
file(GLOB_RECURSE TF_GOLDEN_XZ CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/tests/golden/model/*.safetensors.xz
     ${PROJECT_SOURCE_DIR}/tests/golden/processor/*.safetensors.xz)
if(TF_GOLDEN_XZ)
  find_program(TF_XZ xz)
  if(TF_XZ)
    set(_unxz ${TF_XZ} -dc)
  else()  # e.g. the GPU machine: Python's lzma does the same
    find_program(TF_PYTHON3 python3)
    if(NOT TF_PYTHON3)
      message(FATAL_ERROR "neither xz nor python3 found: the test goldens are xz-compressed (apt-get install xz-utils)")
    endif()
    # (no ';' in the code: CMake would split it into list items)
    set(_unxz ${TF_PYTHON3} -c "import lzma,sys\nsys.stdout.buffer.write(lzma.open(sys.argv[1]).read())")
  endif()
endif()
set(_unpacked 0)
foreach(z IN LISTS TF_GOLDEN_XZ)
  string(REGEX REPLACE "\\.xz$" "" raw "${z}")
  if(NOT EXISTS "${raw}" OR "${z}" IS_NEWER_THAN "${raw}")
    execute_process(COMMAND ${_unxz} "${z}" OUTPUT_FILE "${raw}.part" RESULT_VARIABLE rc)
    file(SIZE "${raw}.part" _size)
    if(NOT rc EQUAL 0 OR _size EQUAL 0)
      file(REMOVE "${raw}.part")
      message(FATAL_ERROR "could not unpack ${z} (exit ${rc})")
    endif()
    file(RENAME "${raw}.part" "${raw}")
    math(EXPR _unpacked "${_unpacked} + 1")
  endif()
endforeach()
list(LENGTH TF_GOLDEN_XZ _n)
message(STATUS "test goldens: ${_n} compressed, ${_unpacked} unpacked now")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TF_GOLDEN_XZ})
