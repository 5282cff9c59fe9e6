# Warnings every gyre target compiles with; errors when GYRE_WERROR is on (CI). Under clang, the
# thread-safety analysis too, its findings errors when GYRE_THREAD_SAFETY is on (the default there).
# GCC's -Wnull-dereference runs after inlining; in the sanitizer builds (-O1) it reports paths
# that cannot happen inside library headers (CLI11's string splitting, in src/train/options.cc
# under ThreadSanitizer), so those builds leave it out and the Release build keeps it. It must be
# left out here, not cancelled in sanitizers.cmake: these options come later on the command line.
set(_gyre_null_deref -Wnull-dereference)
if(GYRE_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(_gyre_null_deref)
endif()
add_library(gyre_warnings INTERFACE)
target_compile_options(gyre_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused -Woverloaded-virtual
  ${_gyre_null_deref} -Wimplicit-fallthrough
  $<$<CXX_COMPILER_ID:Clang,AppleClang>:-Wthread-safety>
  $<$<BOOL:${GYRE_THREAD_SAFETY}>:-Werror=thread-safety>
  $<$<BOOL:${GYRE_WERROR}>:-Werror>
  # In a unity build GCC sees each file as included, not as the main file, and warns of
  # anonymous-namespace types in members as if they were in a header.
  $<$<AND:$<BOOL:${GYRE_UNITY}>,$<CXX_COMPILER_ID:GNU>>:-Wno-subobject-linkage>)
