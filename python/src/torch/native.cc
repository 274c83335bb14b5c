// meshcomm.torch._native: the torch backend's hot path in C++.
//
// ProcessGroupMeshcomm (python/meshcomm/torch/process_group.py) stays a
// Python subclass of torch's ProcessGroup: torch's Python functions call
// its methods directly, and torch's C++ callers (DDP, functional
// collectives) reach them through torch's trampoline. Each hot method hands
// its arguments here first (today all_reduce and broadcast), to plain
// CPython functions that take torch's own objects as they are (tensors,
// AllreduceOptions: the module is built against the installed torch and its
// pybind11, so it shares torch's type registry), check them, run the
// operation on meshcomm's C++ group and return a torch Work, with no Python
// in between. Anything off the hot path (several tensors, a
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
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../error_names.h"
#include "../group_capsule.h"
#include "blocking.h"
#include "operators.h"
#include "tensors.h"
#include "meshcomm/error.h"
#include "meshcomm/process_group.h"

namespace py = pybind11;

namespace meshcomm::torch_native {
namespace {

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

std::chrono::milliseconds timeoutOf(std::chrono::milliseconds torchTimeout) {
  // torch's "unset" is negative; meshcomm's is 0 (the group's own).
  return torchTimeout.count() > 0 ? torchTimeout : std::chrono::milliseconds(0);
}

// An operation that completed before the call returned.
class CompletedWork : public c10d::Work {
 public:
  explicit CompletedWork(c10d::OpType type) : c10d::Work(-1, type) { finish(); }
  void setResult(const at::Tensor& tensor) {
    if (result_.size() == 1) {
      result_[0] = tensor;
    } else {
      result_.assign(1, tensor);
    }
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

// The Work a blocking call returns. Making one (a C++ object, its Python
// wrapper, and both freed when the caller drops it) costs more than the
// whole meshcomm operation of a small call, and torch's dist.all_reduce
// only waits on it and drops it. So the last one of each kind is kept and
// handed out again when nobody else holds it (neither its Python wrapper
// nor the C++ object has another reference). It keeps the last call's
// tensors alive until the next call, which is why only Works of tensors
// whose storage is small are kept. GIL held.
class WorkPool {
 public:
  static constexpr size_t kKeptStorageBytes = 64 << 10;

  explicit WorkPool(c10d::OpType type) : type_(type) {}

  // A new reference to a completed Work whose result() is `tensor`.
  PyObject* workFor(const at::Tensor& tensor) {
    const bool keep = tensor.storage().nbytes() <= kKeptStorageBytes;
    if (keep && object_ != nullptr && Py_REFCNT(object_) == 1 && work_.use_count() == 2) {
      work_->setResult(tensor);
      return Py_NewRef(object_);
    }
    auto work = c10::make_intrusive<CompletedWork>(type_);
    work->setResult(tensor);
    py::object object = py::cast(c10::intrusive_ptr<c10d::Work>(work));
    if (keep) {
      Py_XDECREF(object_);
      object_ = Py_NewRef(object.ptr());
      work_ = work;
    }
    return object.release().ptr();
  }

 private:
  const c10d::OpType type_;
  // Kept for the life of the process (never released at exit, when Python
  // is already gone).
  PyObject* object_ = nullptr;
  c10::intrusive_ptr<CompletedWork> work_;
};

WorkPool& poolOf(c10d::OpType type) {
  static auto* allreduce = new WorkPool(c10d::OpType::ALLREDUCE);
  static auto* broadcast = new WorkPool(c10d::OpType::BROADCAST);
  return type == c10d::OpType::ALLREDUCE ? *allreduce : *broadcast;
}

// ---- the arguments, as torch passes them ------------------------------------

PyObject* notHere() { return Py_NewRef(Py_NotImplemented); }

// meshcomm's group in the capsule ProcessGroup._capsule() made, or null
// (with Python's error set).
ProcessGroup* groupOf(PyObject* capsule) {
  auto* held = static_cast<std::shared_ptr<ProcessGroup>*>(
      PyCapsule_GetPointer(capsule, python::kGroupCapsuleName));
  return held == nullptr ? nullptr : held->get();
}

// The one tensor of torch's list (or tuple) of tensors, or null.
const at::Tensor* onlyTensor(PyObject* tensors) {
  PyObject* item = nullptr;
  if (PyList_CheckExact(tensors) && PyList_GET_SIZE(tensors) == 1) {
    item = PyList_GET_ITEM(tensors, 0);
  } else if (PyTuple_CheckExact(tensors) && PyTuple_GET_SIZE(tensors) == 1) {
    item = PyTuple_GET_ITEM(tensors, 0);
  }
  if (item == nullptr || !THPVariable_Check(item)) return nullptr;
  return &THPVariable_Unpack(item);
}

// torch's options object (AllreduceOptions, BroadcastOptions), or null if
// `opts` is not one. An object of exactly the registered class is read
// straight from its pybind11 instance: a general cast of a type another
// module registered looks it up by name (hashing it) on every call.
template <class Options>
const Options* optionsOf(PyObject* opts) {
  static PyTypeObject* const exact = [] {
    py::handle type = py::detail::get_type_handle(typeid(Options), false);
    return reinterpret_cast<PyTypeObject*>(type.ptr());
  }();
  if (exact != nullptr && Py_TYPE(opts) == exact) {
    auto* instance = reinterpret_cast<py::detail::instance*>(opts);
    return static_cast<const Options*>(instance->get_value_and_holder().value_ptr());
  }
  try {
    return &py::cast<const Options&>(py::handle(opts));
  } catch (const py::cast_error&) {
    return nullptr;
  }
}

// Runs `body` as the CPython function of a module: a C++ exception becomes
// Python's error, never an escape through the interpreter.
template <class Body>
PyObject* guarded(Body&& body) {
  try {
    return body();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (...) {
    python::setPythonError(std::current_exception());
  }
  return nullptr;
}

// ---- the calls -------------------------------------------------------------------

// A call as torch makes it, (group, tensors, opts): a torch Work once the
// operation ran, or NotImplemented when it is not one this part takes (not
// exactly one tensor meshcomm reads in place, an asynchronous call, or
// options `accept` refuses; accept fills the operation's own options).
template <class Options, class Accept, class Issue>
PyObject* blockingCall(PyObject* const* args, Py_ssize_t nargs, const char* usage,
                       c10d::OpType type, Accept&& accept, Issue&& issue) {
  return guarded([&]() -> PyObject* {
    if (nargs != 3) throw py::type_error(usage);
    ProcessGroup* group = groupOf(args[0]);
    if (group == nullptr) return nullptr;
    const at::Tensor* tensor = onlyTensor(args[1]);
    const Options* opts = optionsOf<Options>(args[2]);
    if (tensor == nullptr || opts == nullptr || opts->asyncOp) return notHere();
    const std::optional<TensorRef> data = asIs(*tensor);
    OpOptions o;
    if (!data || !accept(*opts, o)) return notHere();
    o.timeout = timeoutOf(opts->timeout);
    o.blocking = true;
    const Outcome outcome = runBlocking([&] { return issue(*group, *data, o); });
    if (outcome.interrupted) return nullptr;  // the handler's exception is set
    if (outcome.error) {
      python::setPythonError(outcome.error);
      return nullptr;
    }
    return poolOf(type).workFor(*tensor);
  });
}

PyObject* allreduce(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return blockingCall<c10d::AllreduceOptions>(
      args, nargs, "allreduce(group, tensors, opts)", c10d::OpType::ALLREDUCE,
      [](const c10d::AllreduceOptions& opts, OpOptions& o) {
        const std::optional<ReduceOp> op = reduceOpOf(opts.reduceOp);
        if (!op || opts.sparseIndices.has_value()) return false;
        o.op = *op;
        return true;
      },
      [](ProcessGroup& g, TensorRef data, const OpOptions& o) { return g.allReduce(data, o); });
}

// The root is checked by meshcomm (a rank outside the group: ValueError).
PyObject* broadcast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return blockingCall<c10d::BroadcastOptions>(
      args, nargs, "broadcast(group, tensors, opts)", c10d::OpType::BROADCAST,
      [](const c10d::BroadcastOptions& opts, OpOptions& o) {
        if (opts.rootTensor != 0 || opts.rootRank < INT_MIN || opts.rootRank > INT_MAX) {
          return false;
        }
        o.root = static_cast<int>(opts.rootRank);
        return true;
      },
      [](ProcessGroup& g, TensorRef data, const OpOptions& o) { return g.broadcast(data, o); });
}

// all_reduce_(tensor, group, op="sum"): torch.ops.meshcomm.all_reduce_'s
// kernel called straight from Python, without torch's operator dispatch
// (which costs more than the whole operation of a small call). Raises what
// the operator raises.
PyObject* allReduceInPlaceCall(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 2 || nargs > 3 || !THPVariable_Check(args[0]) || !PyLong_Check(args[1]) ||
      (nargs == 3 && !PyUnicode_Check(args[2]))) {
    PyErr_SetString(PyExc_TypeError,
                    "all_reduce_(tensor: Tensor, group: int, op: str = 'sum')");
    return nullptr;
  }
  const long long handle = PyLong_AsLongLong(args[1]);
  if (handle == -1 && PyErr_Occurred()) return nullptr;
  Py_ssize_t length = 3;
  const char* op = "sum";
  if (nargs == 3 && (op = PyUnicode_AsUTF8AndSize(args[2], &length)) == nullptr) return nullptr;
  try {
    // The kernel writes the tensor's data, never the handle itself.
    allReduceInPlace(const_cast<at::Tensor&>(THPVariable_Unpack(args[0])), handle,
                     c10::string_view(op, static_cast<size_t>(length)));
    return Py_NewRef(args[0]);
  } catch (python_error& e) {
    e.restore();
  } catch (const c10::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
  } catch (const c10::TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
  } catch (...) {
    python::setPythonError(std::current_exception());
  }
  return nullptr;
}

// register_group(capsule) -> the handle torch.ops.meshcomm's operators
// take for the capsule's group (operators.h).
PyObject* registerGroup(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return guarded([&]() -> PyObject* {
    if (nargs != 1) throw py::type_error("register_group(group)");
    auto* held = static_cast<std::shared_ptr<ProcessGroup>*>(
        PyCapsule_GetPointer(args[0], python::kGroupCapsuleName));
    if (held == nullptr) return nullptr;
    return PyLong_FromLongLong(addOperatorGroup(*held));
  });
}

// unregister_group(handle): the handle names no group from now on.
PyObject* unregisterGroup(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  return guarded([&]() -> PyObject* {
    if (nargs != 1) throw py::type_error("unregister_group(handle)");
    const long long handle = PyLong_AsLongLong(args[0]);
    if (handle == -1 && PyErr_Occurred()) return nullptr;
    removeOperatorGroup(handle);
    Py_RETURN_NONE;
  });
}

// Plain CPython functions: pybind11's dispatcher (argument casters, a type
// lookup per foreign argument) would cost a small call more than meshcomm's
// whole operation.
PyMethodDef kMethods[] = {
    {"allreduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&allreduce)),
     METH_FASTCALL,
     "allreduce(group, tensors, opts): a blocking all_reduce of one tensor as meshcomm takes "
     "it, on the group of a ProcessGroup._capsule(); NotImplemented for anything else (the "
     "caller then takes its general path)."},
    {"broadcast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&broadcast)),
     METH_FASTCALL,
     "broadcast(group, tensors, opts): a blocking broadcast of one tensor as meshcomm takes "
     "it; NotImplemented for anything else."},
    {"all_reduce_",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&allReduceInPlaceCall)),
     METH_FASTCALL,
     "all_reduce_(tensor, group, op='sum'): torch.ops.meshcomm.all_reduce_ without torch's "
     "operator dispatch."},
    {"register_group",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&registerGroup)), METH_FASTCALL,
     "register_group(group): the handle torch.ops.meshcomm's operators take for the group of a "
     "ProcessGroup._capsule()."},
    {"unregister_group",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&unregisterGroup)), METH_FASTCALL,
     "unregister_group(handle): the handle names no group from now on."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace
}  // namespace meshcomm::torch_native

PYBIND11_MODULE(_native, m) {
  m.doc() = "meshcomm's torch backend, the hot path in C++ (see meshcomm.torch).";
  // torch's option classes must be registered before optionsOf looks them up.
  py::module_::import("torch.distributed");
  if (PyModule_AddFunctions(m.ptr(), meshcomm::torch_native::kMethods) != 0) {
    throw py::error_already_set();
  }
}
