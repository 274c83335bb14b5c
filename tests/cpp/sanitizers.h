// Which sanitizer this test binary was built with, for the few tests whose
// bounds or counts a sanitizer changes (quarantined memory, a background
// thread of its own). GCC defines __SANITIZE_*__; clang answers
// __has_feature.
#pragma once

namespace meshcomm::test {

// __has_feature where the compiler has it (clang, GCC 14), else false: GCC
// before 14 cannot even parse it in an #if.
#if defined(__has_feature)
#define MESHCOMM_TEST_HAS_FEATURE(feature) __has_feature(feature)
#else
#define MESHCOMM_TEST_HAS_FEATURE(feature) 0
#endif

#if defined(__SANITIZE_ADDRESS__) || MESHCOMM_TEST_HAS_FEATURE(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

#if defined(__SANITIZE_THREAD__) || MESHCOMM_TEST_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

}  // namespace meshcomm::test
