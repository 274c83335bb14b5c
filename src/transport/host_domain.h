// HostDomain: the ranks of one group that share a host, joined by state they
// all map (a capability a transport kind's link may offer, transport/link.h).
// The group's collectives among those ranks run on the domain directly,
// not through messages: the kind's collectives register under its name in
// src/host/registry.cc. The transport core knows a domain only through
// this interface, so a new on-host kind adds no word here.
//
// Thread-safety: announce() and the rounds of the kind's collectives run on
// the thread driving the group's operation; abort() and the abort checks
// may run on any thread.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "transport/transport.h"
#include "transport/wire.h"

namespace meshcomm {

class HostDomain {
 public:
  virtual ~HostDomain() = default;

  // The kind that set the domain up: its collectives' key in the host
  // registry (src/host/registry.cc).
  virtual const char* kind() const = 0;
  virtual int localRank() const = 0;
  virtual int localSize() const = 0;
  // Group rank of a local rank.
  virtual int groupRank(int local) const = 0;

  // Records that this rank entered collective call `seq` of the group with
  // signature `sig`, so a rank waiting on a local peer that runs another
  // call can name the mismatch.
  virtual void announce(uint64_t seq, const MessageSignature& sig) = 0;
  // The domain's abort line: raised (first caller wins) it fails every local
  // rank's wait at once. abort() never throws.
  virtual void abort(wire::AbortReason reason, const std::string& message) noexcept = 0;
  // The error of the raised abort line, or null.
  virtual std::exception_ptr abortError() const = 0;
  // Throws what the abort line says, if it is raised.
  virtual void throwIfAborted() const = 0;
};

}  // namespace meshcomm
