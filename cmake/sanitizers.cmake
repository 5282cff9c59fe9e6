# GYRE_SANITIZE=address,undefined or thread instruments every target.
if(GYRE_SANITIZE)
  set(_san "-fsanitize=${GYRE_SANITIZE}" -fno-omit-frame-pointer -fno-sanitize-recover=all)
  # Line tables only: the reports' stacks keep their files and lines, and the build (CI builds
  # two of these from scratch) takes about a fifth less time than with full debug information.
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    add_compile_options(${_san} -O1 -gline-tables-only)
  else()
    add_compile_options(${_san} -O1 -g1)
  endif()
  # (cmake/warnings.cmake leaves GCC's -Wnull-dereference out of these builds.)
  add_link_options(${_san})
endif()
