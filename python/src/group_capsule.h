// How a meshcomm group crosses from _meshcomm to a module built with another
// pybind11 (meshcomm.torch._native), which cannot take _meshcomm's classes:
// ProcessGroup._capsule() returns a capsule of this name owning a
// std::shared_ptr<meshcomm::ProcessGroup>.
#pragma once

namespace meshcomm::python {

inline constexpr const char* kGroupCapsuleName = "meshcomm.ProcessGroup";

}  // namespace meshcomm::python
