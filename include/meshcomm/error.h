// meshcomm error hierarchy.
//
// Every public call reports failure by throwing a subclass of meshcomm::Error.
// The message always says what happened and, where it applies, on which group,
// in which operation and with which ranks, so it can be shown to a user as is.
// docs/errors.md says what each error means and what a caller can do after it.
//
// Thread-safety: exception objects are immutable after construction.
#pragma once

#include <stdexcept>
#include <string>

#include "meshcomm/export.h"

namespace meshcomm {

// Base of every error meshcomm throws.
class MESHCOMM_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The caller passed something meshcomm cannot accept (a bad size, a dtype
// mismatch, an out-of-range rank). Raised before any communication starts.
class MESHCOMM_API InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A deadline passed: a store key never appeared, a peer never answered.
class MESHCOMM_API Timeout : public Error {
 public:
  using Error::Error;
};

// A peer process went away (connection reset, EOF, dead pid). The group it
// belonged to cannot be used for further collectives.
class MESHCOMM_API PeerLost : public Error {
 public:
  using Error::Error;
};

// The store refused a request or its connection failed (auth refused, value
// not numeric for add, server gone).
class MESHCOMM_API StoreError : public Error {
 public:
  using Error::Error;
};

// Ranks disagree about an operation (different counts, dtypes or ops for the
// same collective). Raised on every rank that can detect it.
class MESHCOMM_API Mismatch : public Error {
 public:
  using Error::Error;
};

// The object (group, store) was shut down or aborted while the call waited.
class MESHCOMM_API Aborted : public Error {
 public:
  using Error::Error;
};

// The calling thread's interrupt check (meshcomm/interrupt.h) fired while a
// blocking operation waited. The operation was abandoned and its group
// aborted on every rank.
class MESHCOMM_API Interrupted : public Aborted {
 public:
  using Aborted::Aborted;
};

}  // namespace meshcomm
