// Clang's thread-safety annotations, checked by -Wthread-safety (clang's "Thread Safety
// Analysis" documentation describes each attribute). Under any other compiler they expand to
// nothing. The clang build makes their violations errors (GYRE_THREAD_SAFETY in CMakeLists.txt).
//
// Typical use, with gyre::Mutex and gyre::MutexLock (common/mutex.h):
//
//   class Counter {
//    public:
//     void add(int n) GYRE_EXCLUDES(mu_) { MutexLock lock(mu_); addLocked(n); }
//    private:
//     void addLocked(int n) GYRE_REQUIRES(mu_) { total_ += n; }
//     Mutex mu_;
//     int total_ GYRE_GUARDED_BY(mu_) = 0;
//   };
//
// A lambda that reads guarded members while its caller holds the lock (a condition variable's
// predicate) says so itself: [&]() GYRE_REQUIRES(mu_) { return total_ > 0; }.
//
// GYRE_NO_THREAD_SAFETY_ANALYSIS turns the analysis off for one function; use it only where a
// correct pattern is beyond the analysis, with a comment saying why.
#pragma once

#if defined(__clang__)
#define GYRE_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define GYRE_THREAD_ANNOTATION_(x)
#endif

// On a class: its objects are capabilities (a mutex); `x` names the kind in messages.
#define GYRE_CAPABILITY(x) GYRE_THREAD_ANNOTATION_(capability(x))
// On a class: an RAII object that holds the capabilities its constructor acquires.
#define GYRE_SCOPED_CAPABILITY GYRE_THREAD_ANNOTATION_(scoped_lockable)

// On a data member: reading or writing it needs `x` (writing needs it exclusively).
#define GYRE_GUARDED_BY(x) GYRE_THREAD_ANNOTATION_(guarded_by(x))
// On a pointer member: the data it points to is guarded by `x` (the pointer itself is not).
#define GYRE_PT_GUARDED_BY(x) GYRE_THREAD_ANNOTATION_(pt_guarded_by(x))

// On a mutex member: lock order (checked only with -Wthread-safety-beta).
#define GYRE_ACQUIRED_BEFORE(...) GYRE_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define GYRE_ACQUIRED_AFTER(...) GYRE_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))

// On a function: the caller must hold the capabilities (exclusively, or at least shared).
#define GYRE_REQUIRES(...) GYRE_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define GYRE_REQUIRES_SHARED(...) GYRE_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))

// On a function: it acquires / releases the capabilities (none named: `this`). A scoped
// capability's destructor is GYRE_RELEASE() with no argument.
#define GYRE_ACQUIRE(...) GYRE_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define GYRE_ACQUIRE_SHARED(...) GYRE_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define GYRE_RELEASE(...) GYRE_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define GYRE_RELEASE_SHARED(...) GYRE_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#define GYRE_RELEASE_GENERIC(...) GYRE_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))

// On a function: it acquires the capabilities when it returns `result` (try_lock).
#define GYRE_TRY_ACQUIRE(...) GYRE_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define GYRE_TRY_ACQUIRE_SHARED(...) GYRE_THREAD_ANNOTATION_(try_acquire_shared_capability(__VA_ARGS__))

// On a function: the caller must not hold the capabilities (the function takes them itself).
#define GYRE_EXCLUDES(...) GYRE_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// On a function: it returns only when the capability is held (a run-time check), and the
// analysis then takes it as held.
#define GYRE_ASSERT_CAPABILITY(x) GYRE_THREAD_ANNOTATION_(assert_capability(x))
#define GYRE_ASSERT_SHARED_CAPABILITY(x) GYRE_THREAD_ANNOTATION_(assert_shared_capability(x))

// On a function: it returns (a reference to) the capability `x`.
#define GYRE_RETURN_CAPABILITY(x) GYRE_THREAD_ANNOTATION_(lock_returned(x))

// On a function: no analysis of its body (its own annotations still bind its callers).
#define GYRE_NO_THREAD_SAFETY_ANALYSIS GYRE_THREAD_ANNOTATION_(no_thread_safety_analysis)
