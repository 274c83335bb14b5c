// Element types, reduction operators, the tensor view the C++ API takes and
// the point-to-point operation record.
//
// Thread-safety: plain values; all functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "meshcomm/export.h"

namespace meshcomm {

enum class DType : uint8_t {
  kBool,
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kComplex64,
  kComplex128,
};
inline constexpr int kNumDTypes = 15;

// Bytes per element (inline: it is asked on every operation).
constexpr size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kInt8:
    case DType::kUInt8:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
    case DType::kComplex64:
      return 8;
    case DType::kComplex128:
      return 16;
  }
  return 0;  // not a DType
}
// "float32", "bfloat16", ... (numpy spelling; "bfloat16" for the one numpy lacks).
MESHCOMM_API const char* dtypeName(DType dtype);
// Inverse of dtypeName; throws InvalidArgument for an unknown name.
MESHCOMM_API DType dtypeFromName(std::string_view name);

enum class ReduceOp : uint8_t { kSum, kProd, kMin, kMax };
inline constexpr int kNumReduceOps = 4;

// "sum", "prod", "min", "max".
MESHCOMM_API const char* reduceOpName(ReduceOp op);
// Inverse of reduceOpName; throws InvalidArgument for anything else.
MESHCOMM_API ReduceOp reduceOpFromName(std::string_view name);
// Whether op is defined for dtype (min/max are not defined for complex).
constexpr bool reduceOpSupports(ReduceOp op, DType dtype) {
  const bool complex = dtype == DType::kComplex64 || dtype == DType::kComplex128;
  return !(complex && (op == ReduceOp::kMin || op == ReduceOp::kMax));
}

// A view of caller-owned contiguous memory: numel elements of dtype at data.
// meshcomm never takes ownership and never keeps the pointer past the
// operation that received it (async operations: until their Work completes).
struct TensorRef {
  void* data = nullptr;
  int64_t numel = 0;
  DType dtype = DType::kFloat32;

  size_t bytes() const { return static_cast<size_t>(numel) * dtypeSize(dtype); }
};

// One send or receive of a batched point-to-point call (and what send and
// recv issue): `tensor` goes to, or arrives from, group rank `peer`, and
// matches the other side's operation with the same tag.
struct P2POp {
  enum class Kind { kSend, kRecv };
  Kind kind;
  TensorRef tensor;
  int peer;  // group rank
  int tag = 0;
};

}  // namespace meshcomm
