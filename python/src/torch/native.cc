// meshcomm.torch._native: the torch backend's hot path in C++.
//
// ProcessGroupMeshcomm (python/meshcomm/torch/process_group.py) stays a
// Python subclass of torch's ProcessGroup: torch's Python functions call
// its methods directly, and torch's C++ callers (DDP, functional
// collectives) reach them through torch's trampoline. Each hot method hands
// its arguments here first (today all_reduce and broadcast). This module
// takes torch's own objects as they
// are (tensors, AllreduceOptions: it is built against the installed torch
// and its pybind11, so it shares torch's type registry), checks them,
// runs the operation on meshcomm's C++ group and returns a torch Work, with
// no Python in between. Anything off the hot path (several tensors, a
// strided or non-CPU tensor, a complex dtype, an op meshcomm builds in
// Python, an asynchronous call) returns NotImplemented, and the Python
// method does what it always did.
//
// meshcomm's group comes from the capsule ProcessGroup._capsule() makes:
// the _meshcomm module is built with another pybind11, whose types this
// module cannot see.
#include <Python.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../error_names.h"
#include "../group_capsule.h"
#include "meshcomm/error.h"
#include "meshcomm/interrupt.h"
#include "meshcomm/process_group.h"

namespace py = pybind11;

namespace meshcomm::torch_native {
namespace {

// How long one sleeping slice of a wait lasts: the longest a Ctrl-C waits
// to be noticed while a blocking call waits behind queued operations.
constexpr auto kSlice = std::chrono::milliseconds(50);

// The dtype meshcomm moves for a torch dtype, if it moves it as it is.
// Complex dtypes are not: torch hands them as real views, and a complex
// tensor reaching the backend takes the Python path, which does that.
std::optional<DType> dtypeOf(at::ScalarType t) {
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

// The reductions meshcomm runs itself; AVG and the bitwise ones are built
// from them in Python.
std::optional<ReduceOp> reduceOpOf(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::kSum;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::kProd;
    case c10d::ReduceOp::MIN: return ReduceOp::kMin;
    case c10d::ReduceOp::MAX: return ReduceOp::kMax;
    default: return std::nullopt;
  }
}

// `t` as meshcomm reads it in place: a contiguous CPU tensor with no lazy
// negation or conjugation, of a dtype meshcomm moves as it is.
std::optional<TensorRef> asIs(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || t.layout() != at::kStrided || !t.is_contiguous() ||
      t.is_neg() || t.is_conj()) {
    return std::nullopt;
  }
  const std::optional<DType> dtype = dtypeOf(t.scalar_type());
  if (!dtype) return std::nullopt;
  return TensorRef{t.data_ptr(), t.numel(), *dtype};
}

std::chrono::milliseconds timeoutOf(std::chrono::milliseconds torchTimeout) {
  // torch's "unset" is negative; meshcomm's is 0 (the group's own).
  return torchTimeout.count() > 0 ? torchTimeout : std::chrono::milliseconds(0);
}

// An operation that completed before the call returned.
class CompletedWork : public c10d::Work {
 public:
  CompletedWork(std::vector<at::Tensor> result, c10d::OpType type)
      : c10d::Work(-1, type), result_(std::move(result)) {
    finish();
  }
  bool wait(std::chrono::milliseconds /*timeout*/) override { return true; }
  std::vector<at::Tensor> result() override { return result_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    auto future =
        c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    future->markCompleted(c10::IValue(result_));
    return future;
  }

 private:
  std::vector<at::Tensor> result_;
};

// The interrupt check of a blocking call: runs Python's signal handlers.
// A handler that raised (KeyboardInterrupt) leaves its exception set, and
// the call raises it once the operation has been abandoned.
bool pythonSignalRaised(void*) {
  PyGILState_STATE state = PyGILState_Ensure();
  const bool raised = PyErr_CheckSignals() != 0;
  PyGILState_Release(state);
  return raised;
}

// Raises `error` (a meshcomm error) as meshcomm's Python class.
[[noreturn]] void raise(const std::exception_ptr& error) {
  python::setPythonError(error);
  throw py::error_already_set();
}

// Runs one blocking operation: `issue` starts it (without the GIL, and
// interruptibly), and a call that had to queue behind earlier operations
// is waited for in slices, with Python's signal handlers run in between.
template <class Issue>
void runBlocking(Issue&& issue) {
  WorkPtr work;
  std::exception_ptr error;
  {
    ScopedInterruptCheck check(&pythonSignalRaised, nullptr);
    py::gil_scoped_release release;
    try {
      work = issue();
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (PyErr_Occurred()) throw py::error_already_set();  // interrupted
  if (error) raise(error);
  while (!work->isCompleted()) {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    py::gil_scoped_release release;
    work->wait(kSlice);
  }
  if (auto e = work->exception()) raise(e);
}

}  // namespace

// One torch group's meshcomm group, as the native calls use it.
class NativeGroup {
 public:
  explicit NativeGroup(py::object capsule) {
    auto* held = static_cast<std::shared_ptr<ProcessGroup>*>(
        PyCapsule_GetPointer(capsule.ptr(), python::kGroupCapsuleName));
    if (held == nullptr) throw py::error_already_set();
    group_ = *held;
  }

  // allreduce(tensors, opts): a torch Work, or NotImplemented.
  py::object allreduce(const std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
    if (opts.asyncOp || tensors.size() != 1 || opts.sparseIndices.has_value()) return notHere();
    const std::optional<TensorRef> data = asIs(tensors[0]);
    const std::optional<ReduceOp> op = reduceOpOf(opts.reduceOp);
    if (!data || !op) return notHere();
    OpOptions o;
    o.op = *op;
    o.timeout = timeoutOf(opts.timeout);
    o.blocking = true;
    runBlocking([&] { return group_->allReduce(*data, o); });
    return completed(tensors, c10d::OpType::ALLREDUCE);
  }

  // broadcast(tensors, opts): a torch Work, or NotImplemented. The root is
  // checked by meshcomm (a rank outside the group: ValueError).
  py::object broadcast(const std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
    if (opts.asyncOp || tensors.size() != 1 || opts.rootTensor != 0) return notHere();
    const std::optional<TensorRef> data = asIs(tensors[0]);
    if (!data || opts.rootRank < INT_MIN || opts.rootRank > INT_MAX) return notHere();
    OpOptions o;
    o.root = static_cast<int>(opts.rootRank);
    o.timeout = timeoutOf(opts.timeout);
    o.blocking = true;
    runBlocking([&] { return group_->broadcast(*data, o); });
    return completed(tensors, c10d::OpType::BROADCAST);
  }

 private:
  static py::object notHere() { return py::reinterpret_borrow<py::object>(Py_NotImplemented); }
  static py::object completed(const std::vector<at::Tensor>& tensors, c10d::OpType type) {
    return py::cast(
        c10::intrusive_ptr<c10d::Work>(c10::make_intrusive<CompletedWork>(tensors, type)));
  }

  std::shared_ptr<ProcessGroup> group_;
};

}  // namespace meshcomm::torch_native

PYBIND11_MODULE(_native, m) {
  using meshcomm::torch_native::NativeGroup;
  m.doc() = "meshcomm's torch backend, the hot path in C++ (see meshcomm.torch).";
  py::class_<NativeGroup>(m, "NativeGroup")
      .def(py::init<py::object>(), py::arg("capsule"),
           "The native calls of one meshcomm group (from ProcessGroup._capsule()).")
      .def("allreduce", &NativeGroup::allreduce, py::arg("tensors"), py::arg("opts"),
           "A blocking all_reduce of one tensor as meshcomm takes it; NotImplemented for "
           "anything else (the caller then takes its general path).")
      .def("broadcast", &NativeGroup::broadcast, py::arg("tensors"), py::arg("opts"),
           "A blocking broadcast of one tensor as meshcomm takes it; NotImplemented for "
           "anything else.");
}
