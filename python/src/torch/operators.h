// torch.ops.meshcomm: meshcomm's collectives as torch operators
// (operators.cc). An operator names its group by a handle, an integer
// (a torch operator cannot take meshcomm's group object): the torch backend
// registers each group it makes and removes it when the group is destroyed.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <memory>

namespace meshcomm {
class ProcessGroup;
}

namespace meshcomm::torch_native {

// The handle operators take for `group`; never reused in the process.
int64_t addOperatorGroup(std::shared_ptr<ProcessGroup> group);

// The handle names no group from now on (an operator given it raises
// ValueError); the group's own close fails operations already running.
void removeOperatorGroup(int64_t handle);

// torch.ops.meshcomm.all_reduce_'s kernel: reduces `tensor` in place on
// the group of `handle` by `op` (sum, avg, max, min, prod) and returns it.
// Throws c10::ValueError / c10::TypeError for bad arguments and
// python_error (Python's error: meshcomm's, or KeyboardInterrupt) when the
// operation fails. Callable with the GIL held or not.
at::Tensor& allReduceInPlace(at::Tensor& tensor, int64_t handle, c10::string_view op);

}  // namespace meshcomm::torch_native
