// The processor's hint for a spin-wait loop (pause on x86, yield on Arm): it frees the core's
// shared resources for a sibling thread while the loop polls.
#pragma once

namespace gyre {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace gyre
