// torch.ops.meshcomm: meshcomm's all_reduce as a torch operator.
//
//   torch.ops.meshcomm.all_reduce_(tensor, group, op="sum")           (in place)
//   torch.ops.meshcomm.all_reduce(tensor, group, op="sum") -> new tensor
//
// The same call torch's dispatcher makes for any operator: a tensor-parallel
// model calls it straight from its forward pass (as DeepSpeed's CPU
// all_reduce is called), skipping torch.distributed's Python wrapper, which
// costs several times what the operation itself does at small sizes; and
// torch.compile traces it like any other operator (Meta kernels below give
// it shapes; all_reduce_ mutates its argument and returns nothing, which
// torch.compile functionalizes: an operator returning an alias of its
// input it cannot). `group` is a handle the torch backend gives
// out (meshcomm.torch.group_handle), `op` one of sum, prod, min, max, avg.
// Errors are Python's: ValueError for bad arguments, TypeError for a dtype
// meshcomm does not move, meshcomm's own errors (DistPeerLostError, ...) for
// a failed operation, KeyboardInterrupt when Ctrl-C ends a wait.
#include "operators.h"

#include <ATen/ATen.h>
#include <torch/csrc/Exceptions.h>
#include <torch/library.h>

#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "../error_names.h"
#include "blocking.h"
#include "meshcomm/process_group.h"
#include "tensors.h"

namespace meshcomm::torch_native {
namespace {

// Handle -> group. Handles count from 1 and are never reused, so a stale
// handle names nothing rather than another group.
class GroupTable {
 public:
  int64_t add(std::shared_ptr<ProcessGroup> group) {
    std::lock_guard<std::mutex> lock(mu_);
    groups_.push_back(std::move(group));
    return static_cast<int64_t>(groups_.size());
  }

  void remove(int64_t handle) {
    std::lock_guard<std::mutex> lock(mu_);
    if (valid(handle)) groups_[handle - 1].reset();
  }

  std::shared_ptr<ProcessGroup> find(int64_t handle) {
    std::lock_guard<std::mutex> lock(mu_);
    return valid(handle) ? groups_[handle - 1] : nullptr;
  }

 private:
  bool valid(int64_t handle) const {
    return handle >= 1 && handle <= static_cast<int64_t>(groups_.size());
  }

  std::mutex mu_;
  std::vector<std::shared_ptr<ProcessGroup>> groups_;
};

// Never destroyed: an operator may still run while the process exits.
GroupTable& groups() {
  static auto* table = new GroupTable;
  return *table;
}

struct Reduction {
  ReduceOp op;
  bool average;  // sum, then divide by the group's size
};

Reduction reductionOf(std::string_view name) {
  if (name == "sum") return {ReduceOp::kSum, false};
  if (name == "avg") return {ReduceOp::kSum, true};
  if (name == "max") return {ReduceOp::kMax, false};
  if (name == "min") return {ReduceOp::kMin, false};
  if (name == "prod" || name == "product") return {ReduceOp::kProd, false};
  TORCH_CHECK_VALUE(false, "meshcomm: all_reduce's op must be one of sum, avg, max, min, prod; got '",
                    name, "'");
}

// Raises the outcome of a failed call as Python sees it, through torch's
// dispatcher (which hands a python_error back to the interpreter as is).
[[noreturn]] void raise(const Outcome& outcome) {
  PyGILState_STATE state = PyGILState_Ensure();
  if (!outcome.interrupted) python::setPythonError(outcome.error);
  python_error error;
  error.persist();
  PyGILState_Release(state);
  throw error;
}

}  // namespace

at::Tensor& allReduceInPlace(at::Tensor& tensor, int64_t handle, c10::string_view opName) {
  const Reduction reduction = reductionOf(std::string_view(opName.data(), opName.size()));
  const std::shared_ptr<ProcessGroup> group = groups().find(handle);
  TORCH_CHECK_VALUE(group != nullptr, "meshcomm: no group has handle ", handle,
                    ": take one from meshcomm.torch.group_handle(group) (a destroyed group's "
                    "handle names none)");
  TORCH_CHECK_VALUE(tensor.device().is_cpu(), "meshcomm: all_reduce takes CPU tensors; this one is on ",
                    tensor.device());
  TORCH_CHECK_VALUE(tensor.layout() == at::kStrided,
                    "meshcomm: all_reduce takes dense tensors; this one is ", tensor.layout());
  TORCH_CHECK_VALUE(!reduction.average || tensor.is_floating_point() || tensor.is_complex(),
                    "meshcomm: all_reduce with op 'avg' needs a floating-point or complex tensor; "
                    "this one is ", tensor.scalar_type());
  TORCH_CHECK_VALUE(!tensor.is_complex() || reduction.op == ReduceOp::kSum,
                    "meshcomm: a complex tensor reduces by sum or avg only");

  // meshcomm reduces contiguous memory of real numbers; anything else is
  // reduced in a copy that is written back.
  const bool inPlace = tensor.is_contiguous() && !tensor.is_neg() && !tensor.is_conj();
  const at::Tensor buffer = inPlace ? tensor : tensor.resolve_conj().resolve_neg().contiguous();
  const at::Tensor real = buffer.is_complex() ? at::view_as_real(buffer) : buffer;
  const std::optional<DType> dtype = dtypeOf(real.scalar_type());
  TORCH_CHECK_TYPE(dtype.has_value(), "meshcomm: all_reduce does not move ", tensor.scalar_type(),
                   " tensors");

  OpOptions options;
  options.op = reduction.op;
  options.blocking = true;
  const TensorRef data{real.data_ptr(), real.numel(), *dtype};
  const Outcome outcome = runBlocking([&] { return group->allReduce(data, options); });
  if (!outcome.ok()) raise(outcome);

  if (reduction.average) real.div_(group->size());
  if (!inPlace) tensor.copy_(buffer);
  return tensor;
}

namespace {

void allReduceOperator(at::Tensor& tensor, int64_t handle, c10::string_view op) {
  allReduceInPlace(tensor, handle, op);
}

at::Tensor allReduceOutOfPlace(const at::Tensor& tensor, int64_t handle, c10::string_view op) {
  at::Tensor result = tensor.clone(at::MemoryFormat::Contiguous);
  allReduceInPlace(result, handle, op);
  return result;
}

// Shapes only, for torch.compile's tracing.
void allReduceOperatorMeta(at::Tensor&, int64_t, c10::string_view) {}

at::Tensor allReduceOutOfPlaceMeta(const at::Tensor& tensor, int64_t, c10::string_view) {
  return at::empty_like(tensor, at::MemoryFormat::Contiguous);
}

}  // namespace

int64_t addOperatorGroup(std::shared_ptr<ProcessGroup> group) { return groups().add(std::move(group)); }

void removeOperatorGroup(int64_t handle) { groups().remove(handle); }

}  // namespace meshcomm::torch_native

TORCH_LIBRARY(meshcomm, m) {
  m.def("all_reduce_(Tensor(a!) tensor, int group, str op=\"sum\") -> ()");
  m.def("all_reduce(Tensor tensor, int group, str op=\"sum\") -> Tensor");
}

TORCH_LIBRARY_IMPL(meshcomm, CPU, m) {
  m.impl("all_reduce_", &meshcomm::torch_native::allReduceOperator);
  m.impl("all_reduce", &meshcomm::torch_native::allReduceOutOfPlace);
}

TORCH_LIBRARY_IMPL(meshcomm, Meta, m) {
  m.impl("all_reduce_", &meshcomm::torch_native::allReduceOperatorMeta);
  m.impl("all_reduce", &meshcomm::torch_native::allReduceOutOfPlaceMeta);
}
