# GYRE_SANITIZE=address,undefined or thread instruments every target.
if(GYRE_SANITIZE)
  set(_san "-fsanitize=${GYRE_SANITIZE}" -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_san} -O1 -g)
  # GCC's -Wnull-dereference runs after inlining, and at -O1 it reports paths that cannot happen
  # inside library headers (CLI11's string splitting, in src/train/options.cc under
  # ThreadSanitizer); the Release build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-null-dereference)
  endif()
  add_link_options(${_san})
endif()
