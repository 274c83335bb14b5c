// Thread-safety annotations: which lock guards which data, stated so that
// clang's -Wthread-safety analysis checks it at compile time.
//
// A lock is a "capability" (common/mutex.h's Mutex is one). A field marked
// GUARDED_BY(mu) may be read or written only while mu is held; a function
// marked REQUIRES(mu) may be called only while mu is held, and one marked
// EXCLUDES(mu) only while it is not. The analysis follows each function's
// body on its own (it does not look into callees, lambdas' callers or
// std::function), so such contracts are stated on declarations.
//
// Under compilers without these attributes (GCC builds meshcomm by default)
// every macro expands to nothing. CMake's MESHCOMM_THREAD_SAFETY_ANALYSIS
// turns the analysis on, as errors, in a clang build.
//
// Thread-safety: macros only.
#pragma once

#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(capability)
#define MESHCOMM_THREAD_ANNOTATION(x) __attribute__((x))
#endif
#endif
#ifndef MESHCOMM_THREAD_ANNOTATION
#define MESHCOMM_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are locks; `kind` names them in diagnostics.
#define CAPABILITY(kind) MESHCOMM_THREAD_ANNOTATION(capability(kind))
// On a class: an object that holds a lock from construction to destruction
// (or to an earlier release).
#define SCOPED_CAPABILITY MESHCOMM_THREAD_ANNOTATION(scoped_lockable)

// On a field: accessed only with the lock held.
#define GUARDED_BY(lock) MESHCOMM_THREAD_ANNOTATION(guarded_by(lock))
// On a pointer field: what it points to is accessed only with the lock held
// (the pointer itself is not guarded).
#define PT_GUARDED_BY(lock) MESHCOMM_THREAD_ANNOTATION(pt_guarded_by(lock))
// On a lock: the order in which locks are taken. Documentation for readers;
// clang checks it only under -Wthread-safety-beta.
#define ACQUIRED_BEFORE(...) MESHCOMM_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) MESHCOMM_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))

// On a function: the caller holds these locks, before and after.
#define REQUIRES(...) MESHCOMM_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// On a function: the caller must not hold these locks (the function takes
// them, and they are not reentrant).
#define EXCLUDES(...) MESHCOMM_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: takes these locks (no argument in a lock's own methods:
// the lock itself) and returns holding them.
#define ACQUIRE(...) MESHCOMM_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
// On a function: takes these locks when it returns `success`, else not.
#define TRY_ACQUIRE(...) MESHCOMM_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: releases these locks, which the caller held.
#define RELEASE(...) MESHCOMM_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// On a function: tells the analysis that the lock is held from here on,
// for code it cannot follow (a lambda run by another function). Checks
// nothing at run time.
#define ASSERT_CAPABILITY(lock) MESHCOMM_THREAD_ANNOTATION(assert_capability(lock))
// On a function: returns (a reference to) this lock, so callers may name
// the lock in their own annotations through the function.
#define RETURN_CAPABILITY(lock) MESHCOMM_THREAD_ANNOTATION(lock_returned(lock))

// On a function: not analysed. Each use says why in a comment.
#define NO_THREAD_SAFETY_ANALYSIS MESHCOMM_THREAD_ANNOTATION(no_thread_safety_analysis)
