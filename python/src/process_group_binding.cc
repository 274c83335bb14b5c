// Bindings of World (joining the job, the group registry) and ProcessGroup
// (members, and one method per entry of the operation table,
// collectives/operations.h, under the operation's Python name). The table
// itself is exported as OPERATIONS, so the Python layer derives its lists
// of operations from it.
//
// Tensors cross the boundary as raw descriptors, (address, numel, dtype)
// tuples with dtype the meshcomm::DType value; meshcomm/_core/descriptors.py makes
// them from numpy arrays, torch tensors and buffers and keeps those alive
// until the operation completes. A buffer-protocol object (a numpy array)
// is accepted in place of a descriptor, which saves the hot paths a call.
//
// Every operation takes `timeout_ms` (0: the group's) and `blocking`, and
// returns a Work. A blocking submission runs the operation on the calling
// thread when the group is idle (see runtime/executor.h), so the GIL is
// released around it and Ctrl-C can interrupt it (see issue()); a
// non-blocking one only queues, which never waits.
//
// Everything that may block without an operation in between (World.init,
// new_group, destroy_group, close) releases the GIL too. Argument checks
// that the C++ core does not make live in Python.
#include <Python.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings.h"
#include "group_capsule.h"
#include "collectives/operations.h"
#include "runtime/operation_methods.h"
#include "meshcomm/error.h"
#include "meshcomm/interrupt.h"
#include "meshcomm/process_group.h"
#include "meshcomm/store.h"
#include "meshcomm/types.h"

namespace py = pybind11;

namespace meshcomm::python {

namespace {

using Desc = std::tuple<uintptr_t, int64_t, int>;
using Counts = std::vector<int64_t>;
using Group = std::shared_ptr<ProcessGroup>;

ReduceOp reduceOp(int op) {
  if (op < 0 || op >= kNumReduceOps) {
    throw InvalidArgument("unknown reduce op code " + std::to_string(op));
  }
  return static_cast<ReduceOp>(op);
}

// The DType of a buffer-protocol format ("f", "<i", "Zd", ...) of
// `itemsize` bytes, or -1. Sizes decide for the C integer kinds, whose
// width varies by platform.
int dtypeOfFormat(const char* format, Py_ssize_t itemsize) {
  std::string f = format ? format : "B";
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<' || f[0] == '>' || f[0] == '!')) {
    char order = f[0];
    f = f.substr(1);
    // Only native little-endian data can be reduced in place.
    if ((order == '>' || order == '!') && itemsize > 1) return -1;
  }
  auto sized = [&](DType i8, DType i16, DType i32, DType i64) -> int {
    switch (itemsize) {
      case 1:
        return static_cast<int>(i8);
      case 2:
        return static_cast<int>(i16);
      case 4:
        return static_cast<int>(i32);
      case 8:
        return static_cast<int>(i64);
      default:
        return -1;
    }
  };
  if (f == "?") return itemsize == 1 ? static_cast<int>(DType::kBool) : -1;
  if (f == "b" || f == "h" || f == "i" || f == "l" || f == "q" || f == "n") {
    return sized(DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64);
  }
  if (f == "B" || f == "H" || f == "I" || f == "L" || f == "Q" || f == "N" || f == "c") {
    return sized(DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64);
  }
  if (f == "e" && itemsize == 2) return static_cast<int>(DType::kFloat16);
  if (f == "f" && itemsize == 4) return static_cast<int>(DType::kFloat32);
  if (f == "d" && itemsize == 8) return static_cast<int>(DType::kFloat64);
  if (f == "Zf" && itemsize == 8) return static_cast<int>(DType::kComplex64);
  if (f == "Zd" && itemsize == 16) return static_cast<int>(DType::kComplex128);
  return -1;
}

// (address, numel, dtype) of a buffer-protocol object (numpy arrays,
// memoryviews, bytearrays, array.array). The view is released before
// returning: the caller keeps the exporter (and so the memory) alive.
// Raises TypeError for unsupported element types and ValueError for
// non-contiguous or (when `writable`) read-only buffers.
Desc describeBuffer(py::handle obj, bool writable) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_RECORDS_RO) != 0) {
    // numpy refuses some dtypes (datetime, object) with its own message.
    py::error_already_set cause;
    throw py::type_error("cannot read the memory of a " + std::string(Py_TYPE(obj.ptr())->tp_name) +
                         ": " + cause.what());
  }
  struct Releaser {
    Py_buffer* v;
    ~Releaser() { PyBuffer_Release(v); }
  } releaser{&view};
  if (!PyBuffer_IsContiguous(&view, 'C')) {
    throw py::value_error(
        "the tensor is not contiguous; pass a contiguous copy "
        "(numpy.ascontiguousarray, tensor.contiguous())");
  }
  if (writable && view.readonly) {
    throw py::value_error("the tensor is read-only but receives the result");
  }
  int dtype = dtypeOfFormat(view.format, view.itemsize);
  if (dtype < 0 && view.format && (view.format[0] == '>' || view.format[0] == '!')) {
    throw py::type_error(std::string("big-endian elements (buffer format '") + view.format +
                         "') are not supported; convert to native byte order first");
  }
  if (dtype < 0) {
    throw py::type_error(std::string("unsupported element type (buffer format '") +
                         (view.format ? view.format : "B") + "', " + std::to_string(view.itemsize) +
                         " bytes per element)");
  }
  return Desc{reinterpret_cast<uintptr_t>(view.buf), view.len / view.itemsize, dtype};
}

TensorRef fromDesc(const Desc& d) {
  const auto [address, numel, dtype] = d;
  if (dtype < 0 || dtype >= kNumDTypes) {
    throw InvalidArgument("unknown dtype code " + std::to_string(dtype));
  }
  return TensorRef{reinterpret_cast<void*>(address), numel, static_cast<DType>(dtype)};
}

// A tensor argument: a descriptor tuple (what meshcomm/_core/descriptors.py makes),
// or, on the hot paths, a buffer-protocol object such as a numpy array,
// described here to save a call. Throws TypeError/ValueError for
// something else; `writable` applies to buffer objects (descriptors were
// checked in Python).
TensorRef toRef(py::handle h, bool writable) {
  Desc d;
  if (PyTuple_Check(h.ptr()) && PyTuple_GET_SIZE(h.ptr()) == 3) {
    d = h.cast<Desc>();
  } else {
    d = describeBuffer(h, writable);
  }
  return fromDesc(d);
}

std::vector<TensorRef> refs(py::handle seq, bool writable) {
  std::vector<TensorRef> out;
  for (py::handle h : py::reinterpret_borrow<py::sequence>(seq)) out.push_back(toRef(h, writable));
  return out;
}

// The options every operation takes; what else it takes is set by the
// option kinds of defineOperation.
OpOptions options(int64_t timeoutMs, bool blocking) {
  OpOptions o;
  o.timeout = std::chrono::milliseconds(timeoutMs < 0 ? 0 : timeoutMs);
  o.blocking = blocking;
  return o;
}

// The interrupt check of blocking calls: runs Python's signal handlers (on
// the main thread; elsewhere it finds nothing to do). A handler that raised
// (KeyboardInterrupt on Ctrl-C) leaves its exception set for issue().
bool pythonSignalRaised(void*) {
  py::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

// Issues an operation. A blocking one runs here when its group is idle, so
// without the GIL, and interruptibly: if a signal handler raises meanwhile,
// the operation is abandoned (its group aborted) and that exception is what
// Python sees. A blocking call that had to queue returns its pending Work,
// which meshcomm/handle.py then waits on interruptibly without abandoning it.
template <typename F>
WorkPtr issue(bool blocking, F&& call) {
  if (!blocking) return call();
  WorkPtr work;
  {
    ScopedInterruptCheck check(&pythonSignalRaised, nullptr);
    py::gil_scoped_release release;
    work = call();
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  return work;
}

// Owns the World. Dropping it shuts the job down, which may wait (rank 0
// keeps the store up until every rank has left), so that happens without
// the GIL, except while the interpreter is finalizing and other threads
// must not be let in.
class WorldHandle {
 public:
  explicit WorldHandle(std::shared_ptr<World> world) : world_(std::move(world)) {}
  ~WorldHandle() { close(); }
  WorldHandle(const WorldHandle&) = delete;
  WorldHandle& operator=(const WorldHandle&) = delete;

  World& get() const {
    if (!world_) throw Aborted("the process group was destroyed (destroy_process_group)");
    return *world_;
  }
  bool closed() const { return world_ == nullptr; }

  void close() {
    std::shared_ptr<World> doomed = std::move(world_);
    if (!doomed) return;
    if (_Py_IsFinalizing()) {
      doomed.reset();
      return;
    }
    py::gil_scoped_release release;
    doomed.reset();
  }

 private:
  std::shared_ptr<World> world_;
};

std::unique_ptr<WorldHandle> initWorld(std::shared_ptr<Store> store, std::string initMethod,
                                       int rank, int worldSize, int64_t timeoutMs,
                                       std::string label, std::string worldGroupName,
                                       std::vector<std::string> worldGroupAliases) {
  InitOptions o;
  o.initMethod = std::move(initMethod);
  o.store = std::move(store);
  o.rank = rank;
  o.worldSize = worldSize;
  o.timeout = std::chrono::milliseconds(timeoutMs < 0 ? 0 : timeoutMs);
  o.label = std::move(label);
  o.worldGroupName = std::move(worldGroupName);
  o.worldGroupAliases = std::move(worldGroupAliases);
  std::shared_ptr<World> world;
  {
    py::gil_scoped_release release;
    world = World::init(o);
  }
  return std::make_unique<WorldHandle>(std::move(world));
}

void bindWorld(py::module_& m) {
  py::class_<WorldHandle>(m, "World",
                          "The job: its ranks and groups (see meshcomm/process_group.h).")
      .def(py::init(&initWorld), py::arg("store") = nullptr, py::arg("init_method") = std::string(),
           py::arg("rank") = -1, py::arg("world_size") = -1, py::arg("timeout_ms") = 0,
           py::arg("label") = std::string(), py::arg("world_group_name") = std::string("world"),
           py::arg("world_group_aliases") = std::vector<std::string>(),
           "Join the job (collective: returns once every rank has joined). `label` tells "
           "this World's groups apart in flight-recorder records when the process already "
           "belongs to a job through another World; the world group is named "
           "`world_group_name` and answers to `world_group_aliases` too.")
      .def_property_readonly("rank", [](const WorldHandle& w) { return w.get().rank(); })
      .def_property_readonly("size", [](const WorldHandle& w) { return w.get().size(); })
      .def_property_readonly("local_rank",
                             [](const WorldHandle& w) { return w.get().localRank(); })
      .def_property_readonly(
          "machine_size", [](const WorldHandle& w) { return w.get().machineSize(); },
          "How many of the job's processes run on this machine, whatever hosts "
          "MESHCOMM_HOST_ID makes of it.")
      .def_property_readonly("world_group_name",
                             [](const WorldHandle& w) { return w.get().worldGroupName(); })
      .def_property_readonly("closed", &WorldHandle::closed)
      .def("world_group", [](const WorldHandle& w) { return w.get().worldGroup(); })
      .def(
          "new_group",
          [](const WorldHandle& w, std::vector<int> ranks, std::string namePrefix,
             int64_t timeoutMs) {
            World& world = w.get();
            NewGroupOptions options;
            options.namePrefix = std::move(namePrefix);
            options.timeout = std::chrono::milliseconds(timeoutMs < 0 ? 0 : timeoutMs);
            py::gil_scoped_release release;
            return world.newGroup(std::move(ranks), options);
          },
          py::arg("ranks"), py::arg("name_prefix") = std::string("group"), py::arg("timeout_ms") = 0,
          "Create the group of these world ranks (collective over its members), named "
          "`<name_prefix>_<n>_<sha1 of the ranks>`.")
      .def(
          "find_group",
          [](const WorldHandle& w, const std::string& name) { return w.get().findGroup(name); },
          py::arg("name"), "The group with this name, or None.")
      .def(
          "destroy_group",
          [](const WorldHandle& w, const std::string& name) {
            World& world = w.get();
            py::gil_scoped_release release;
            world.destroyGroup(name);
          },
          py::arg("name"))
      .def("group_names", [](const WorldHandle& w) { return w.get().groupNames(); })
      .def(
          "abort",
          [](const WorldHandle& w) {
            World& world = w.get();
            py::gil_scoped_release release;
            world.abort();
          },
          "Abort every group of this rank.")
      .def(
          "shrink_group",
          [](const WorldHandle& w, std::shared_ptr<ProcessGroup> group, std::vector<int> exclude,
             int64_t timeoutMs) {
            World& world = w.get();
            py::gil_scoped_release release;
            return world.shrinkGroup(group, std::move(exclude),
                                     std::chrono::milliseconds(timeoutMs < 0 ? 0 : timeoutMs));
          },
          py::arg("group"), py::arg("exclude_ranks") = std::vector<int>(),
          py::arg("timeout_ms") = 0,
          "Replace a group with one of its survivors (collective over them).")
      .def("close", &WorldHandle::close,
           "Shut down: destroy every group and leave the job (waits for queued operations).")
      .def_static("group_name", &World::groupName, py::arg("prefix"), py::arg("ranks"));
}

// ---- operations: one binding per entry of the operation table ----------
//
// Each ProcessGroup method is bound as the operation's Python name, taking
// its tensors and sizes (the argument kinds below, in the method's order),
// then what the operation table says it takes (op, root, tag), then
// timeout_ms and blocking. Sizes are in elements; empty lists mean equal
// blocks.

// How an argument is taken: the Python argument's name and type, and its
// C++ value.
template <const char* kArgName, bool kWritable>
struct TensorArg {  // a tensor; kWritable when the operation writes it
  static constexpr const char* kName = kArgName;
  using Python = py::handle;
  static TensorRef convert(py::handle h) { return toRef(h, kWritable); }
};
template <const char* kArgName, bool kWritable>
struct TensorListArg {  // a sequence of tensors
  static constexpr const char* kName = kArgName;
  using Python = py::handle;
  static std::vector<TensorRef> convert(py::handle h) { return refs(h, kWritable); }
};
template <typename T, const char* kArgName>
struct ValueArg {  // passed on as it is: a group rank, or elements per rank
  static constexpr const char* kName = kArgName;
  using Python = T;
  static T convert(T value) { return value; }
};
struct P2POpsArg {  // (is_send, tensor, peer group rank, tag) tuples
  static constexpr const char* kName = "ops";
  using Python = std::vector<std::tuple<bool, Desc, int, int>>;
  static std::vector<P2POp> convert(const Python& list) {
    std::vector<P2POp> ops;
    ops.reserve(list.size());
    for (const auto& [isSend, t, peer, tag] : list) {
      ops.push_back(P2POp{isSend ? P2POp::Kind::kSend : P2POp::Kind::kRecv, fromDesc(t), peer, tag});
    }
    return ops;
  }
};

constexpr char kTensorName[] = "tensor";
constexpr char kOutputName[] = "output";
constexpr char kInputName[] = "input";
constexpr char kOutputsName[] = "outputs";
constexpr char kInputsName[] = "inputs";
constexpr char kCountsName[] = "counts";
constexpr char kRecvCountsName[] = "recv_counts";
constexpr char kSendCountsName[] = "send_counts";
constexpr char kDstName[] = "dst";
constexpr char kSrcName[] = "src";

// How the binding takes each argument kind of operation_methods.h.
template <class Kind>
struct Binding;
template <> struct Binding<argument::Data> : TensorArg<kTensorName, true> {};  // read and written
template <> struct Binding<argument::Sent> : TensorArg<kTensorName, false> {};
template <> struct Binding<argument::Output> : TensorArg<kOutputName, true> {};
template <> struct Binding<argument::Input> : TensorArg<kInputName, false> {};
template <> struct Binding<argument::Outputs> : TensorListArg<kOutputsName, true> {};
template <> struct Binding<argument::Inputs> : TensorListArg<kInputsName, false> {};
template <> struct Binding<argument::Splits> : ValueArg<Counts, kCountsName> {};
template <> struct Binding<argument::RecvSplits> : ValueArg<Counts, kRecvCountsName> {};
template <> struct Binding<argument::SendSplits> : ValueArg<Counts, kSendCountsName> {};
template <> struct Binding<argument::Dst> : ValueArg<int, kDstName> {};
template <> struct Binding<argument::Src> : ValueArg<int, kSrcName> {};
template <> struct Binding<argument::P2POps> : P2POpsArg {};

// The trailing arguments the operation table asks for; each sets a field
// of the OpOptions.
struct OpArg {
  static constexpr const char* kName = "op";
  static void apply(int code, OpOptions& o) { o.op = reduceOp(code); }
};
struct RootArg {
  static constexpr const char* kName = "root";
  static void apply(int rank, OpOptions& o) { o.root = rank; }
};
struct TagArg {
  static constexpr const char* kName = "tag";
  static void apply(int tag, OpOptions& o) { o.tag = tag; }
};

template <typename... T>
struct Kinds {};
// One int per option kind.
template <typename>
using IntArg = int;

// OpArg, RootArg and TagArg, those the operation takes, in that order.
template <Operation kOp>
constexpr auto optionKinds() {
  constexpr const OperationInfo& info = operationInfo(kOp);
  static_assert(!(info.rooted() && info.tagged), "no operation takes both a root and a tag");
  if constexpr (info.reduces && info.rooted()) return Kinds<OpArg, RootArg>{};
  else if constexpr (info.reduces) return Kinds<OpArg>{};
  else if constexpr (info.rooted()) return Kinds<RootArg>{};
  else if constexpr (info.tagged) return Kinds<TagArg>{};
  else return Kinds<>{};
}

using GroupClass = py::class_<ProcessGroup, Group>;

// Binds `kMethod` as operation kOp: fills the options, converts the Args
// (under the GIL, as they read Python objects), then issues.
template <Operation kOp, auto kMethod, typename... Args, typename... Options>
void defineOperationWith(GroupClass& g, Kinds<Options...>) {
  g.def(
      operationName(kOp),
      [](ProcessGroup& p, typename Args::Python... args, IntArg<Options>... opts, int64_t timeoutMs,
         bool blocking) {
        OpOptions o = options(timeoutMs, blocking);
        (Options::apply(opts, o), ...);
        auto converted = std::make_tuple(Args::convert(args)...);
        return issue(blocking, [&] {
          return std::apply([&](auto&... a) { return (p.*kMethod)(a..., o); }, converted);
        });
      },
      py::arg(Args::kName)..., py::arg(Options::kName)..., py::arg("timeout_ms"),
      py::arg("blocking"));
}
template <Operation kOp, auto kMethod, typename... Args>
void defineOperation(GroupClass& g) {
  defineOperationWith<kOp, kMethod, Args...>(g, optionKinds<kOp>());
}

template <class Method, class... Kinds>
void defineMethod(GroupClass& g, std::tuple<Kinds...>) {
  defineOperation<Method::kOperation, Method::kPointer, Binding<Kinds>...>(g);
}

// Every operation, as runtime/operation_methods.h lists them.
void defineOperations(GroupClass& g) {
  forEachOperationMethod([&g]<class Method>() {
    defineMethod<Method>(g, typename Method::ArgumentKinds{});
  });
}

void bindGroup(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<ProcessGroup, Group> g(m, "ProcessGroup",
                                    "A set of ranks running operations together.");
  g.def_property_readonly("name", &ProcessGroup::name)
      .def_property_readonly("rank", &ProcessGroup::rank)
      .def_property_readonly("size", &ProcessGroup::size)
      .def_property_readonly("world_ranks", &ProcessGroup::worldRanks)
      .def_property_readonly("timeout_ms",
                             [](const ProcessGroup& p) { return p.timeout().count(); })
      .def("to_world_rank", &ProcessGroup::toWorldRank, "group_rank"_a)
      .def("to_group_rank", &ProcessGroup::toGroupRank, "world_rank"_a)
      .def(
          "abort",
          [](ProcessGroup& p) {
            py::gil_scoped_release release;
            p.abort();
          },
          "Abort the group on this rank (any thread; see meshcomm/process_group.h).")
      .def(
          "error", [](const ProcessGroup& p) { return pythonErrorOf(p.error()); },
          "Why the group is broken (an exception), or None while it is healthy.")
      .def(
          "_capsule",
          [](Group self) {
            // A module built with another pybind11 (the torch backend's
            // native part) cannot take this class; it takes the group from
            // this capsule, which owns a reference to it.
            auto* held = new Group(std::move(self));
            PyObject* capsule = PyCapsule_New(held, kGroupCapsuleName, [](PyObject* c) {
              delete static_cast<Group*>(PyCapsule_GetPointer(c, kGroupCapsuleName));
            });
            if (capsule == nullptr) {
              delete held;
              throw py::error_already_set();
            }
            return py::reinterpret_steal<py::object>(capsule);
          },
          "A capsule (named meshcomm.ProcessGroup) owning a reference to this group.");

  defineOperations(g);
  // Not one of the reference API's operations: torch.distributed's recv
  // without a source (the torch backend) uses it.
  g.def(
      "recv_any_source",
      [](ProcessGroup& p, py::handle tensor, int tag, int64_t timeoutMs, bool blocking) {
        OpOptions o = options(timeoutMs, blocking);
        o.tag = tag;
        TensorRef t = toRef(tensor, true);
        return issue(blocking, [&] { return p.recvAnySource(t, o); });
      },
      "tensor"_a, "tag"_a, "timeout_ms"_a, "blocking"_a,
      "Receive the first message with `tag` from any rank; the Work's source_rank names the "
      "sender.");
}

}  // namespace

void initProcessGroup(py::module_& m) {
  py::dict codes;
  for (int i = 0; i < kNumDTypes; ++i) codes[dtypeName(static_cast<DType>(i))] = i;
  m.attr("DTYPE_CODES") = codes;
  py::dict ops;
  for (int i = 0; i < kNumReduceOps; ++i) ops[reduceOpName(static_cast<ReduceOp>(i))] = i;
  m.attr("REDUCE_OP_CODES") = ops;
  m.def(
      "reduce_op_supports",
      [](int op, int dtype) -> bool {
        return reduceOpSupports(reduceOp(op), fromDesc(Desc{0, 0, dtype}).dtype);
      },
      py::arg("op"), py::arg("dtype"));
  // The operation table: name -> what the operation takes beyond its tensors.
  py::dict operations;
  for (const OperationInfo& info : kOperations) {
    py::dict entry;
    entry["family"] = static_cast<int>(info.family);
    entry["reduces"] = info.reduces;
    entry["root"] = info.rooted() ? py::object(py::str(info.rootName())) : py::object(py::none());
    entry["split_sizes"] = info.splitSizes;
    entry["tagged"] = info.tagged;
    operations[info.name] = entry;
  }
  m.attr("OPERATIONS") = operations;
  m.def("describe_buffer", &describeBuffer, py::arg("obj"), py::arg("writable"),
        "(address, numel, dtype code) of a contiguous buffer-protocol object.");
  bindGroup(m);
  bindWorld(m);
}

}  // namespace meshcomm::python
