// torch tensors as meshcomm reads them in place.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "meshcomm/process_group.h"

namespace meshcomm::torch_native {

// The dtype meshcomm moves for a torch dtype, if it moves it as it is.
// Complex dtypes are not: torch hands them as real views.
inline std::optional<DType> dtypeOf(at::ScalarType t) {
  switch (t) {
    case at::kBool: return DType::kBool;
    case at::kChar: return DType::kInt8;
    case at::kByte: return DType::kUInt8;
    case at::kShort: return DType::kInt16;
    case at::kUInt16: return DType::kUInt16;
    case at::kInt: return DType::kInt32;
    case at::kUInt32: return DType::kUInt32;
    case at::kLong: return DType::kInt64;
    case at::kUInt64: return DType::kUInt64;
    case at::kHalf: return DType::kFloat16;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kFloat: return DType::kFloat32;
    case at::kDouble: return DType::kFloat64;
    default: return std::nullopt;
  }
}

// `t` as meshcomm reads it in place: a contiguous CPU tensor with no lazy
// negation or conjugation, of a dtype meshcomm moves as it is.
inline std::optional<TensorRef> asIs(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || t.layout() != at::kStrided || !t.is_contiguous() ||
      t.is_neg() || t.is_conj()) {
    return std::nullopt;
  }
  const std::optional<DType> dtype = dtypeOf(t.scalar_type());
  if (!dtype) return std::nullopt;
  return TensorRef{t.data_ptr(), t.numel(), *dtype};
}

}  // namespace meshcomm::torch_native
