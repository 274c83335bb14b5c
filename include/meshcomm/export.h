// Symbol visibility for the meshcomm shared library: the library is built with
// -fvisibility=hidden and only declarations marked MESHCOMM_API are exported.
#pragma once

#if defined(MESHCOMM_BUILDING_LIBRARY)
#define MESHCOMM_API __attribute__((visibility("default")))
#else
#define MESHCOMM_API
#endif
