// PythonStore: a meshcomm::Store backed by a Python object with the method
// set of torch.distributed's Store (set, get, add, delete_key, compare_set,
// wait, check, num_keys, append, multi_get, multi_set, timeout,
// set_timeout). It lets World rendezvous through the store torch hands a
// backend (torchrun's TCPStore, a FileStore, a PrefixStore of a sub-group),
// so the job needs no port or rendezvous of its own.
//
// Every call takes the GIL: the runtime calls the store from the thread
// joining the job and from its own threads (liveness checks), never while
// holding the GIL itself, since every binding that may reach the store
// releases it first. Once the interpreter is finalizing no thread may take
// the GIL, so calls then fail with StoreError instead.
//
// Errors: a Python exception whose text mentions a timeout becomes
// meshcomm::Timeout, any other becomes StoreError; both keep its message.
#include <Python.h>
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "meshcomm/error.h"
#include "meshcomm/store.h"

namespace py = pybind11;

namespace meshcomm::python {

namespace {

using Keys = std::vector<std::string>;

class PythonStore final : public Store {
 public:
  explicit PythonStore(py::object store) : store_(std::move(store)) {}

  ~PythonStore() override {
    if (_Py_IsFinalizing()) {
      store_.release();  // leaked: the interpreter frees it on exit
      return;
    }
    py::gil_scoped_acquire gil;
    store_ = py::object();
  }

  using Store::set;
  using Store::wait;

  void set(const std::string& key, const Bytes& value) override {
    call("set", [&] { store_.attr("set")(key, toPy(value)); });
  }
  Bytes get(const std::string& key) override {
    Bytes out;
    call("get", [&] { out = fromPy(store_.attr("get")(key)); });
    return out;
  }
  int64_t add(const std::string& key, int64_t amount) override {
    int64_t out = 0;
    call("add", [&] { out = store_.attr("add")(key, amount).cast<int64_t>(); });
    return out;
  }
  bool deleteKey(const std::string& key) override {
    bool out = false;
    call("delete_key", [&] { out = store_.attr("delete_key")(key).cast<bool>(); });
    return out;
  }
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    Bytes out;
    call("compare_set", [&] {
      out = fromPy(store_.attr("compare_set")(key, toPy(expected), toPy(desired)));
    });
    return out;
  }
  void wait(const Keys& keys, std::chrono::milliseconds timeout) override {
    call("wait", [&] { store_.attr("wait")(keys, timeout); });
  }
  bool check(const Keys& keys) override {
    bool out = false;
    call("check", [&] { out = store_.attr("check")(keys).cast<bool>(); });
    return out;
  }
  int64_t numKeys() override {
    int64_t out = 0;
    call("num_keys", [&] { out = store_.attr("num_keys")().cast<int64_t>(); });
    return out;
  }
  void append(const std::string& key, const Bytes& value) override {
    call("append", [&] { store_.attr("append")(key, toPy(value)); });
  }
  std::vector<Bytes> multiGet(const Keys& keys) override {
    std::vector<Bytes> out;
    call("multi_get", [&] {
      for (py::handle v : store_.attr("multi_get")(keys)) out.push_back(fromPy(v));
    });
    return out;
  }
  void multiSet(const Keys& keys, const std::vector<Bytes>& values) override {
    call("multi_set", [&] {
      py::list converted;
      for (const Bytes& v : values) converted.append(toPy(v));
      store_.attr("multi_set")(keys, converted);
    });
  }
  std::chrono::milliseconds timeout() const override {
    std::chrono::milliseconds out{0};
    call("timeout", [&] {
      out = std::chrono::duration_cast<std::chrono::milliseconds>(
          store_.attr("timeout").cast<std::chrono::duration<double>>());
    });
    return out;
  }
  void setTimeout(std::chrono::milliseconds timeout) override {
    call("set_timeout", [&] { store_.attr("set_timeout")(timeout); });
  }

 private:
  // REQUIRES: the GIL is held.
  static py::bytes toPy(const Bytes& b) {
    return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  }
  // REQUIRES: the GIL is held.
  static Bytes fromPy(py::handle v) {
    std::string s = py::reinterpret_borrow<py::object>(v).cast<std::string>();
    return Bytes(s.begin(), s.end());
  }

  // Runs body under the GIL, turning Python exceptions into meshcomm's.
  template <typename F>
  void call(const char* what, F&& body) const {
    if (_Py_IsFinalizing()) {
      throw StoreError(std::string("store.") + what + ": the Python interpreter is shutting down");
    }
    py::gil_scoped_acquire gil;
    try {
      body();
    } catch (py::error_already_set& e) {
      std::string message = std::string("store.") + what + " failed: " + e.what();
      bool timedOut = message.find("imeout") != std::string::npos ||
                      message.find("timed out") != std::string::npos;
      e.restore();
      PyErr_Clear();
      if (timedOut) throw Timeout(message);
      throw StoreError(message);
    }
  }

  py::object store_;
};

}  // namespace

void initPythonStore(py::module_& m) {
  py::class_<PythonStore, Store, std::shared_ptr<PythonStore>>(
      m, "PythonStore",
      "A meshcomm Store backed by a Python object with torch.distributed.Store's methods.")
      .def(py::init<py::object>(), py::arg("store"));
}

}  // namespace meshcomm::python
