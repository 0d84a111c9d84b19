// thread_annotations.h — Clang thread-safety annotations (the macros of
// leveldb's port/thread_annotations.h and absl/base/thread_annotations.h).
//
// They state a lock rule where the compiler can check it: a member
// GUARDED_BY(mu_) may only be touched with mu_ held, a method REQUIRES(mu_)
// is only called with it held (the *Locked methods), EXCLUDES(mu_) with it
// not held. clang checks them under -Wthread-safety (the root CMakeLists.txt
// turns it on for clang; CI's ASan build uses clang, with -Werror). Other
// compilers see empty macros. The capabilities are common/mutex.h's Mutex
// and MutexLock: std::mutex carries no attributes in libstdc++.
//
// Lambdas are checked as functions of their own that hold nothing: code run
// under a lock is written inline (a wait is a `while (!cond) cv.Wait();`
// loop), not in a lambda handed to a waiting call.
#pragma once

#if defined(__clang__)
#define TC_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TC_THREAD_ANNOTATION(x)
#endif

// A type that is a lock ("mutex").
#define CAPABILITY(x) TC_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a lock for its lifetime.
#define SCOPED_CAPABILITY TC_THREAD_ANNOTATION(scoped_lockable)
// The member is read and written only with the lock held.
#define GUARDED_BY(x) TC_THREAD_ANNOTATION(guarded_by(x))
// What the pointer points to is read and written only with the lock held.
#define PT_GUARDED_BY(x) TC_THREAD_ANNOTATION(pt_guarded_by(x))
// Lock order: this lock is taken after (before) the named ones.
#define ACQUIRED_AFTER(...) TC_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) TC_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
// The caller holds the lock (exclusively / shared).
#define REQUIRES(...) TC_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) TC_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// The function takes (releases) the lock.
#define ACQUIRE(...) TC_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) TC_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) TC_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) TC_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) TC_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// The caller does not hold the lock (the function takes it).
#define EXCLUDES(...) TC_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// The function checks at run time that the lock is held.
#define ASSERT_CAPABILITY(x) TC_THREAD_ANNOTATION(assert_capability(x))
// The function returns a reference to the named lock.
#define RETURN_CAPABILITY(x) TC_THREAD_ANNOTATION(lock_returned(x))
// Leveldb's spelling of REQUIRES.
#define EXCLUSIVE_LOCKS_REQUIRED(...) REQUIRES(__VA_ARGS__)
// The analysis is off in this function: for code it cannot follow (say why).
#define NO_THREAD_SAFETY_ANALYSIS TC_THREAD_ANNOTATION(no_thread_safety_analysis)
