// The registry of transport kinds. Adding a transport is a folder under
// src/transport/ with a function that sets up its Link (transport/link.h),
// and one line in registry.cc.
//
// Thread-safety: the registry is a constant table.
#pragma once

#include <span>

#include "transport/link.h"

namespace meshcomm {

struct TransportKind {
  const char* name;
  LinkSetUp setUp;
};

// Every kind, in the order their links are set up. A peer's messages take
// the last kind that reaches it, so the more local a kind, the later it
// comes.
std::span<const TransportKind> transportKinds();

}  // namespace meshcomm
