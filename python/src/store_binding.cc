// Bindings of the key-value stores: Store (the interface every store
// implements, so later bindings can accept any store) and TCPStore.
//
// Values cross the boundary as Python bytes; the copy into or out of a
// meshcomm::Bytes is made while the GIL is held, and the GIL is released for
// the call itself, since every store call may wait on the network (the
// TCPStore constructor too: it connects, and the server may wait for
// workers). Argument checking beyond type conversion happens in
// meshcomm/store.py.
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "meshcomm/error.h"
#include "meshcomm/store.h"

namespace py = pybind11;

namespace meshcomm::python {

namespace {

using Release = py::call_guard<py::gil_scoped_release>;
using Keys = std::vector<std::string>;

// REQUIRES: the GIL is held.
Bytes toBytes(const py::bytes& b) {
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(b.ptr(), &data, &size) != 0) throw py::error_already_set();
  auto* p = reinterpret_cast<const uint8_t*>(data);
  return Bytes(p, p + size);
}

// REQUIRES: the GIL is held.
py::bytes toPy(const Bytes& b) {
  return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

std::shared_ptr<TCPStore> makeTCPStore(std::string host, int port,
                                       std::optional<int> worldSize, bool isMaster,
                                       int64_t timeoutMs, bool waitForWorkers,
                                       std::string authToken) {
  if (port < 0 || port > 65535) {
    throw InvalidArgument("TCPStore: port must be in [0, 65535], got " +
                          std::to_string(port));
  }
  TCPStoreOptions options;
  options.host = std::move(host);
  options.port = static_cast<uint16_t>(port);
  options.isServer = isMaster;
  options.worldSize = worldSize;
  options.waitForWorkers = waitForWorkers;
  options.timeout = std::chrono::milliseconds(timeoutMs);
  options.authToken = std::move(authToken);
  py::gil_scoped_release release;
  return std::make_shared<TCPStore>(std::move(options));
}

// A call with a key and a value, made without the GIL (the value is
// copied out of the Python object first).
template <void (Store::*Method)(const std::string&, const Bytes&)>
void withValue(Store& s, const std::string& key, const py::bytes& value) {
  Bytes v = toBytes(value);
  py::gil_scoped_release release;
  (s.*Method)(key, v);
}

}  // namespace

void initStore(py::module_& m) {
  py::class_<Store, std::shared_ptr<Store>>(m, "Store",
                                            "Key-value store interface (see meshcomm/store.h).")
      .def("set", &withValue<&Store::set>, py::arg("key"), py::arg("value"))
      .def(
          "get",
          [](Store& s, const std::string& key) {
            Bytes v;
            {
              py::gil_scoped_release release;
              v = s.get(key);
            }
            return toPy(v);
          },
          py::arg("key"))
      .def(
          "add", [](Store& s, const std::string& key, int64_t amount) { return s.add(key, amount); },
          py::arg("key"), py::arg("amount"), Release())
      .def(
          "delete_key", [](Store& s, const std::string& key) { return s.deleteKey(key); },
          py::arg("key"), Release())
      .def(
          "compare_set",
          [](Store& s, const std::string& key, const py::bytes& expected,
             const py::bytes& desired) {
            Bytes e = toBytes(expected);
            Bytes d = toBytes(desired);
            Bytes now;
            {
              py::gil_scoped_release release;
              now = s.compareSet(key, e, d);
            }
            return toPy(now);
          },
          py::arg("key"), py::arg("expected"), py::arg("desired"))
      .def(
          "wait",
          [](Store& s, const Keys& keys, std::optional<int64_t> timeoutMs) {
            if (timeoutMs) {
              s.wait(keys, std::chrono::milliseconds(*timeoutMs));
            } else {
              s.wait(keys);
            }
          },
          py::arg("keys"), py::arg("timeout_ms") = py::none(), Release(),
          "Wait for every key; timeout_ms None means the store's timeout.")
      .def(
          "check", [](Store& s, const Keys& keys) { return s.check(keys); }, py::arg("keys"),
          Release())
      .def(
          "num_keys", [](Store& s) { return s.numKeys(); }, Release())
      .def("append", &withValue<&Store::append>, py::arg("key"), py::arg("value"),
           "Append value to the key's current value (creating it).")
      .def(
          "multi_get",
          [](Store& s, const Keys& keys) {
            std::vector<Bytes> values;
            {
              py::gil_scoped_release release;
              values = s.multiGet(keys);
            }
            py::list out;
            for (const auto& v : values) out.append(toPy(v));
            return out;
          },
          py::arg("keys"))
      .def(
          "multi_set",
          [](Store& s, const Keys& keys, const std::vector<py::bytes>& values) {
            std::vector<Bytes> converted;
            converted.reserve(values.size());
            for (const auto& v : values) converted.push_back(toBytes(v));
            py::gil_scoped_release release;
            s.multiSet(keys, converted);
          },
          py::arg("keys"), py::arg("values"))
      .def_property(
          "timeout_ms", [](const Store& s) { return s.timeout().count(); },
          [](Store& s, int64_t ms) { s.setTimeout(std::chrono::milliseconds(ms)); },
          "Default deadline of get, wait and multi_get, in milliseconds.");

  py::class_<TCPStore, Store, std::shared_ptr<TCPStore>>(
      m, "TCPStore", "TCP key-value store; is_master=True also runs the server.")
      .def(py::init(&makeTCPStore), py::arg("host"), py::arg("port"), py::kw_only(),
           py::arg("world_size") = py::none(), py::arg("is_master") = false,
           py::arg("timeout_ms") = int64_t{300000}, py::arg("wait_for_workers") = true,
           py::arg("auth_token") = std::string())
      .def_property_readonly("host", &TCPStore::host)
      .def_property_readonly("port", &TCPStore::port)
      .def_property_readonly("is_master", &TCPStore::isServer);
}

}  // namespace meshcomm::python
