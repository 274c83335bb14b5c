// The AVX2 ISA level: src/reduce/kernels.h built with -mavx2 -mfma -mf16c
// (set for this file alone in CMakeLists.txt). The dispatcher calls into it
// only after CPUID reports AVX2, FMA and F16C. On targets other than x86 this
// file compiles to nothing (kernel_table.h).
//
// Thread-safety: see kernels.h (pure functions, constant table).
#include "reduce/kernel_table.h"

#if defined(__x86_64__) || defined(__i386__)
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "reduce_avx2.cc needs -mavx2 -mfma -mf16c (see the reduction block in CMakeLists.txt)"
#endif
#define MESHCOMM_REDUCE_NS avx2
#include "reduce/kernels.h"
#endif
