# GYRE_SANITIZE=address,undefined or thread instruments every target.
if(GYRE_SANITIZE)
  set(_san "-fsanitize=${GYRE_SANITIZE}" -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_san} -O1 -g)
  # (cmake/warnings.cmake leaves GCC's -Wnull-dereference out of these builds.)
  add_link_options(${_san})
endif()
