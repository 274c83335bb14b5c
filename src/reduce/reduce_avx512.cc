// The AVX-512 ISA level: src/reduce/kernels.h built with -mavx512f
// -mavx512bw -mavx512vl -mavx512dq plus AVX2, FMA and F16C (set for this
// file alone in CMakeLists.txt). The dispatcher calls into it only after CPUID (and the
// OS, through XCR0) reports all of them. On targets other than x86 this file
// compiles to nothing (kernel_table.h).
//
// Thread-safety: see kernels.h (pure functions, constant table).
#include "reduce/kernel_table.h"

#if defined(__x86_64__) || defined(__i386__)
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512DQ__) || !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "reduce_avx512.cc needs -mavx512f/bw/vl/dq, -mavx2, -mfma, -mf16c (see CMakeLists.txt)"
#endif
#define MESHCOMM_REDUCE_NS avx512
#include "reduce/kernels.h"
#endif
