// Argument checks, CPU detection and ISA dispatch for the reduction kernels.
// This file is compiled with baseline flags: it must run on any CPU, since it
// decides whether the AVX2/AVX-512 code may run at all.
#include "reduce/reduce.h"

#include <cctype>
#include <cstdint>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "common/env.h"
#include "common/logging.h"
#include "meshcomm/error.h"
#include "reduce/kernel_table.h"

namespace meshcomm::reduce {
namespace {

constexpr const char* kIsaNames[kNumIsaLevels] = {"scalar", "avx2", "avx512"};

#if defined(__x86_64__) || defined(__i386__)
// F16C is CPUID.1:ECX bit 29. Read directly because clang's
// __builtin_cpu_supports does not know "f16c"; the OS support it needs (YMM
// state) is the same as AVX2's, which __builtin_cpu_supports checks.
bool cpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}
#endif

bool detectCpu(IsaLevel level) {
#if defined(__x86_64__) || defined(__i386__)
  // The compiler runtime's CPU model also checks XCR0, so a feature whose
  // register state the OS does not save (AVX-512 under some hypervisors)
  // reads as absent.
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpuHasF16c();
  switch (level) {
    case IsaLevel::kScalar:
      return true;
    case IsaLevel::kAvx2:
      return avx2;
    case IsaLevel::kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
#else
  return level == IsaLevel::kScalar;
#endif
}

bool cpuHas(IsaLevel level) {
  static const bool kHas[kNumIsaLevels] = {detectCpu(IsaLevel::kScalar), detectCpu(IsaLevel::kAvx2),
                                           detectCpu(IsaLevel::kAvx512)};
  return kHas[static_cast<int>(level)];
}

const KernelTable* compiledTable(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar:
      return scalar::kernelTable();
    case IsaLevel::kAvx2:
      return avx2::kernelTable();
    case IsaLevel::kAvx512:
      return avx512::kernelTable();
  }
  return nullptr;
}

// The table for a level, or nullptr when this build or CPU cannot run it.
const KernelTable* runnableTable(IsaLevel level) {
  if (static_cast<int>(level) >= kNumIsaLevels) return nullptr;
  const KernelTable* table = compiledTable(level);
  return table != nullptr && cpuHas(level) ? table : nullptr;
}

std::string supportedList() {
  std::string s;
  for (int i = 0; i < kNumIsaLevels; ++i) {
    if (!isaSupported(static_cast<IsaLevel>(i))) continue;
    if (!s.empty()) s += ", ";
    s += kIsaNames[i];
  }
  return s;
}

const KernelTable& tableOrThrow(IsaLevel level) {
  const KernelTable* table = runnableTable(level);
  if (table == nullptr) {
    throw InvalidArgument(std::string("reduce: ISA level ") + isaName(level) +
                          " is not supported on this CPU/build (supported: " + supportedList() +
                          ")");
  }
  return *table;
}

// The table activeIsa() selects, looked up once.
const KernelTable& activeTable() {
  static const KernelTable* const table = &tableOrThrow(activeIsa());
  return *table;
}

bool isComplex(DType d) { return d == DType::kComplex64 || d == DType::kComplex128; }

// Alignment the kernels rely on: the vectorizer may assume naturally aligned
// elements (and peel loops accordingly), and misaligned access through a
// typed pointer is undefined behaviour.
size_t elementAlignment(DType dtype) {
  return isComplex(dtype) ? dtypeSize(dtype) / 2 : dtypeSize(dtype);
}

bool overlaps(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

void checkBuffer(const void* p, size_t align, const char* what, size_t index, const char* op,
                 DType dtype) {
  if (p == nullptr || reinterpret_cast<uintptr_t>(p) % align != 0) {
    throw InvalidArgument(
        std::string("reduce ") + op + " " + dtypeName(dtype) + ": " + what +
        (index != SIZE_MAX ? "[" + std::to_string(index) + "]" : "") +
        (p == nullptr ? " is null" : " is not aligned to " + std::to_string(align) + " bytes"));
  }
}

// Says what is wrong with arguments argsFine() refused, as InvalidArgument.
[[noreturn, gnu::cold, gnu::noinline]] void explainBadReduceArgs(
    ReduceOp op, DType dtype, const void* out, const void* const* inputs, size_t numInputs,
    size_t count) {
  if (static_cast<int>(op) >= kNumReduceOps || static_cast<int>(dtype) >= kNumDTypes) {
    throw InvalidArgument("reduce: op or dtype out of range");
  }
  const char* opName = reduceOpName(op);
  if (!reduceOpSupports(op, dtype)) {
    throw InvalidArgument(std::string("reduce: op '") + opName + "' is not defined for dtype " +
                          dtypeName(dtype));
  }
  if (numInputs == 0) {
    throw InvalidArgument(std::string("reduce ") + opName + ": needs at least one input");
  }
  const size_t size = dtypeSize(dtype);
  if (count > SIZE_MAX / size) {
    throw InvalidArgument(std::string("reduce ") + opName + ": count " + std::to_string(count) +
                          " overflows the address space");
  }
  if (inputs == nullptr) {
    throw InvalidArgument(std::string("reduce ") + opName + ": inputs array is null");
  }
  const size_t bytes = count * size;
  const size_t align = elementAlignment(dtype);
  checkBuffer(out, align, "out", SIZE_MAX, opName, dtype);
  for (size_t k = 0; k < numInputs; ++k) {
    checkBuffer(inputs[k], align, "inputs", k, opName, dtype);
    if ((k != 0 || inputs[k] != out) && overlaps(out, inputs[k], bytes)) {
      throw InvalidArgument(std::string("reduce ") + opName + " " + dtypeName(dtype) +
                            ": out overlaps inputs[" + std::to_string(k) +
                            "] (only out == inputs[0] is allowed)");
    }
  }
  throw InvalidArgument(std::string("reduce ") + opName + ": invalid arguments");
}

// Whether every check of explainBadReduceArgs passes: op and dtype in
// range and defined together, at least one input, no overflowing count, no
// null or misaligned buffer, and no input overlapping `out` other than
// inputs[0] being `out` itself (the kernels read each block of inputs[0]
// before writing it; a shifted overlap would let a write land on data not
// yet read).
bool argsFine(ReduceOp op, DType dtype, const void* out, const void* const* inputs,
              size_t numInputs, size_t count) {
  const auto o = static_cast<unsigned>(op);
  const auto d = static_cast<unsigned>(dtype);
  if (o >= kNumReduceOps || d >= kNumDTypes || numInputs == 0) return false;
  if (!reduceOpSupports(op, dtype)) return false;
  if (count == 0) return true;
  const size_t size = dtypeSize(dtype);
  if (count > SIZE_MAX / size || inputs == nullptr) return false;
  const size_t bytes = count * size;
  const uintptr_t misaligned = elementAlignment(dtype) - 1;
  const auto x = reinterpret_cast<uintptr_t>(out);
  if (out == nullptr || (x & misaligned) != 0) return false;
  for (size_t k = 0; k < numInputs; ++k) {
    const auto y = reinterpret_cast<uintptr_t>(inputs[k]);
    if (y == 0 || (y & misaligned) != 0) return false;
    if ((k != 0 || y != x) && x < y + bytes && y < x + bytes) return false;
  }
  return true;
}

void checkReduceArgs(ReduceOp op, DType dtype, const void* out, const void* const* inputs,
                     size_t numInputs, size_t count) {
  if (!argsFine(op, dtype, out, inputs, numInputs, count)) [[unlikely]] {
    explainBadReduceArgs(op, dtype, out, inputs, numInputs, count);
  }
}

int halfIndex(DType half) {
  if (half == DType::kFloat16) return kHalfFloat16;
  if (half == DType::kBFloat16) return kHalfBFloat16;
  throw InvalidArgument(std::string("reduce: float conversion needs float16 or bfloat16, got ") +
                        dtypeName(half));
}

void checkConvertArgs(const void* out, size_t outAlign, const void* in, size_t inAlign,
                      size_t count, DType half) {
  if (count == 0) return;
  if (count > SIZE_MAX / sizeof(float)) {
    throw InvalidArgument("reduce: conversion count overflows the address space");
  }
  checkBuffer(out, outAlign, "out", SIZE_MAX, "convert", half);
  checkBuffer(in, inAlign, "in", SIZE_MAX, "convert", half);
  const auto o = reinterpret_cast<uintptr_t>(out);
  const auto i = reinterpret_cast<uintptr_t>(in);
  if (o < i + count * inAlign && i < o + count * outAlign) {
    throw InvalidArgument("reduce: conversion buffers overlap");
  }
}

}  // namespace

const char* isaName(IsaLevel level) {
  const int i = static_cast<int>(level);
  return i < kNumIsaLevels ? kIsaNames[i] : "unknown";
}

bool isaSupported(IsaLevel level) { return runnableTable(level) != nullptr; }

IsaLevel bestIsa() {
  for (int i = kNumIsaLevels - 1; i > 0; --i) {
    if (isaSupported(static_cast<IsaLevel>(i))) return static_cast<IsaLevel>(i);
  }
  return IsaLevel::kScalar;
}

IsaLevel resolveIsa(std::optional<std::string_view> requested) {
  if (!requested || requested->empty()) return bestIsa();
  std::string name(*requested);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "auto") return bestIsa();
  for (int i = 0; i < kNumIsaLevels; ++i) {
    if (name != kIsaNames[i]) continue;
    const auto level = static_cast<IsaLevel>(i);
    if (!isaSupported(level)) {
      throw InvalidArgument(
          std::string(kIsaEnvVar) + "=" + std::string(*requested) + " asks for ISA level " +
          kIsaNames[i] + ", which this CPU/build cannot run (supported: " + supportedList() + ")");
    }
    return level;
  }
  throw InvalidArgument(std::string(kIsaEnvVar) + "='" + std::string(*requested) +
                        "' is not one of scalar, avx2, avx512, auto");
}

IsaLevel activeIsa() {
  // A throwing initializer leaves the static uninitialised, so a bad
  // setting is reported again on every call rather than once.
  static const IsaLevel level = [] {
    const std::optional<std::string> env = envString(kIsaEnvVar);
    const IsaLevel chosen = resolveIsa(env ? std::optional<std::string_view>(*env) : std::nullopt);
    MESHCOMM_LOG(kDebug,
                 "reduce: using ISA level "
                     << isaName(chosen)
                     << (env ? std::string(" (") + kIsaEnvVar + "=" + *env + ")" : std::string()));
    return chosen;
  }();
  return level;
}

void reduceInto(ReduceOp op, DType dtype, void* out, const void* const* inputs, size_t numInputs,
                size_t count) {
  const KernelTable& table = activeTable();
  checkReduceArgs(op, dtype, out, inputs, numInputs, count);
  if (count == 0) return;
  table.reduce[static_cast<int>(op)][static_cast<int>(dtype)](out, inputs, numInputs, count);
}

void reduceInPlace(ReduceOp op, DType dtype, void* inout, const void* in, size_t count) {
  const void* inputs[2] = {inout, in};
  reduceInto(op, dtype, inout, inputs, 2, count);
}

void reduceIntoWith(IsaLevel level, ReduceOp op, DType dtype, void* out, const void* const* inputs,
                    size_t numInputs, size_t count) {
  const KernelTable& table = tableOrThrow(level);
  checkReduceArgs(op, dtype, out, inputs, numInputs, count);
  if (count == 0) return;
  table.reduce[static_cast<int>(op)][static_cast<int>(dtype)](out, inputs, numInputs, count);
}

void floatToHalfWith(IsaLevel level, DType half, void* out, const float* in, size_t count) {
  const KernelTable& table = tableOrThrow(level);
  const int h = halfIndex(half);
  checkConvertArgs(out, 2, in, 4, count, half);
  if (count != 0) table.fromFloat[h](out, in, count);
}

void halfToFloatWith(IsaLevel level, DType half, float* out, const void* in, size_t count) {
  const KernelTable& table = tableOrThrow(level);
  const int h = halfIndex(half);
  checkConvertArgs(out, 4, in, 2, count, half);
  if (count != 0) table.toFloat[h](out, in, count);
}

void floatToHalf(DType half, void* out, const float* in, size_t count) {
  floatToHalfWith(activeIsa(), half, out, in, count);
}

void halfToFloat(DType half, float* out, const void* in, size_t count) {
  halfToFloatWith(activeIsa(), half, out, in, count);
}

}  // namespace meshcomm::reduce
