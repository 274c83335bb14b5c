// The scalar ISA level: src/reduce/kernels.h built with the target's
// baseline flags (SSE2 on x86-64), so it runs on every CPU. It is the
// fallback and the reference the other levels are tested against.
//
// Thread-safety: see kernels.h (pure functions, constant table).
#define MESHCOMM_REDUCE_NS scalar
#include "reduce/kernels.h"
