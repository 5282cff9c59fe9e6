# Warnings every gyre target compiles with; errors when GYRE_WERROR is on (CI). Under clang, the
# thread-safety analysis too, its findings errors when GYRE_THREAD_SAFETY is on (the default there).
add_library(gyre_warnings INTERFACE)
target_compile_options(gyre_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused -Woverloaded-virtual
  -Wnull-dereference -Wimplicit-fallthrough
  $<$<CXX_COMPILER_ID:Clang,AppleClang>:-Wthread-safety>
  $<$<BOOL:${GYRE_THREAD_SAFETY}>:-Werror=thread-safety>
  $<$<BOOL:${GYRE_WERROR}>:-Werror>)
