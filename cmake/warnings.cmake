# Warnings every gyre target compiles with; errors when GYRE_WERROR is on (CI).
add_library(gyre_warnings INTERFACE)
target_compile_options(gyre_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused -Woverloaded-virtual
  -Wnull-dereference -Wimplicit-fallthrough
  $<$<CXX_COMPILER_ID:Clang>:-Wthread-safety>
  $<$<BOOL:${GYRE_WERROR}>:-Werror>)
