// catchError: runs a function and reports which meshcomm error class it
// threw, with the message, so a test (or a forked child, where GoogleTest
// assertions do not work) can check the type and the wording of an error.
//
// Thread-safety: pure functions.
#pragma once

#include <exception>
#include <functional>
#include <ostream>
#include <string>

#include "meshcomm/error.h"

namespace meshcomm::test {

// Runs f and returns what it threw: 0 nothing, else which error class, with
// the message in *what.
enum class Caught { kNone, kTimeout, kPeerLost, kMismatch, kInterrupted, kAborted, kInvalidArgument, kOtherError, kOther };
inline const char* caughtName(Caught c) {
  switch (c) {
    case Caught::kNone: return "no error";
    case Caught::kTimeout: return "Timeout";
    case Caught::kPeerLost: return "PeerLost";
    case Caught::kMismatch: return "Mismatch";
    case Caught::kInterrupted: return "Interrupted";
    case Caught::kAborted: return "Aborted";
    case Caught::kInvalidArgument: return "InvalidArgument";
    case Caught::kOtherError: return "another meshcomm::Error";
    case Caught::kOther: return "a non-meshcomm exception";
  }
  return "?";
}
// So that EXPECT_EQ on a Caught prints its name.
inline void PrintTo(Caught c, std::ostream* os) { *os << caughtName(c); }

// Which error class `e` is, tested from the most derived class up
// (Interrupted is an Aborted).
inline Caught caughtKind(const std::exception& e) {
  if (dynamic_cast<const Timeout*>(&e) != nullptr) return Caught::kTimeout;
  if (dynamic_cast<const PeerLost*>(&e) != nullptr) return Caught::kPeerLost;
  if (dynamic_cast<const Mismatch*>(&e) != nullptr) return Caught::kMismatch;
  if (dynamic_cast<const Interrupted*>(&e) != nullptr) return Caught::kInterrupted;
  if (dynamic_cast<const Aborted*>(&e) != nullptr) return Caught::kAborted;
  if (dynamic_cast<const InvalidArgument*>(&e) != nullptr) return Caught::kInvalidArgument;
  if (dynamic_cast<const Error*>(&e) != nullptr) return Caught::kOtherError;
  return Caught::kOther;
}

inline Caught catchError(const std::function<void()>& f, std::string* what = nullptr) {
  try {
    f();
    return Caught::kNone;
  } catch (const std::exception& e) {
    if (what) *what = e.what();
    return caughtKind(e);
  }
}

}  // namespace meshcomm::test
