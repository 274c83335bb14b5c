#include "meshcomm/types.h"

#include <array>
#include <string>

#include "meshcomm/error.h"

namespace meshcomm {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
};

constexpr std::array<DTypeInfo, kNumDTypes> kDTypes = {{
    {DType::kBool, "bool"},
    {DType::kInt8, "int8"},
    {DType::kUInt8, "uint8"},
    {DType::kInt16, "int16"},
    {DType::kUInt16, "uint16"},
    {DType::kInt32, "int32"},
    {DType::kUInt32, "uint32"},
    {DType::kInt64, "int64"},
    {DType::kUInt64, "uint64"},
    {DType::kFloat16, "float16"},
    {DType::kBFloat16, "bfloat16"},
    {DType::kFloat32, "float32"},
    {DType::kFloat64, "float64"},
    {DType::kComplex64, "complex64"},
    {DType::kComplex128, "complex128"},
}};

constexpr std::array<const char*, kNumReduceOps> kOpNames = {"sum", "prod", "min", "max"};

}  // namespace

const char* dtypeName(DType dtype) { return kDTypes[static_cast<size_t>(dtype)].name; }

DType dtypeFromName(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (name == d.name) return d.dtype;
  }
  throw InvalidArgument("unknown dtype '" + std::string(name) + "'");
}

const char* reduceOpName(ReduceOp op) { return kOpNames[static_cast<size_t>(op)]; }

ReduceOp reduceOpFromName(std::string_view name) {
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (name == kOpNames[i]) return static_cast<ReduceOp>(i);
  }
  throw InvalidArgument("unknown reduce op '" + std::string(name) +
                        "'; expected one of sum, prod, min, max");
}

}  // namespace meshcomm
