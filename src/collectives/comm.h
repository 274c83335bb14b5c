// Comm: what one collective call sees — its rank and size, where the
// group's ranks live, and sends and receives tagged with the call's
// sequence number and a step index, so messages of consecutive or
// concurrent operations never match each other.
//
// Thread-safety: used by the one thread running the operation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "collectives/host_collectives.h"
#include "collectives/scratch.h"
#include "collectives/tuning.h"
#include "transport/host_domain.h"
#include "transport/placement.h"
#include "transport/transport.h"

namespace meshcomm {

// Where a group's ranks live and how its collectives reach them, fixed when
// the group was created (transport/group_transport.h).
struct Locality {
  const Placement* placement = nullptr;  // null: treat every rank as remote
  HostDomain* domain = nullptr;          // this host's domain, if it has one
  const HostCollectives* host = nullptr;  // its kind's collectives (with `domain`)
  Route route = Route::kFlat;
};

class Comm {
 public:
  // seq: the group's collective sequence number (the same on every rank
  // for the same call). sig: the operation's signature. algorithm: what
  // runs the call (chooseAlgorithm, asked once when it was issued). With a
  // host domain, announces the call there (HostDomain::announce).
  Comm(Transport& transport, OpContext context, MessageSignature sig, uint64_t seq,
       Algorithm algorithm, ScratchArena& scratch, Locality locality = {});
  // Returns big scratch buffers to the system; see ScratchArena::trim.
  ~Comm();

  int rank() const { return transport_.rank(); }
  int size() const { return transport_.size(); }
  const OpContext& context() const { return context_; }
  const MessageSignature& signature() const { return sig_; }
  Algorithm algorithm() const { return algorithm_; }
  Transport& transport() { return transport_; }

  // How the group's collectives reach its ranks (transport/placement.h).
  Route route() const { return locality_.route; }
  const Placement& placement() const { return *locality_.placement; }
  // Whether this host has a domain (not on a host with one member).
  bool hasHostDomain() const { return locality_.domain != nullptr; }
  // The collectives of this host's domain, and the call on it (with the
  // call's signature, or `sig`). REQUIRES: hasHostDomain().
  const HostCollectives& host() const { return *locality_.host; }
  HostCall hostCall() const { return HostCall{*locality_.domain, context_, sig_}; }
  HostCall hostCall(const MessageSignature& sig) const {
    return HostCall{*locality_.domain, context_, sig};
  }
  // The same call over `sub` (a subset of this group's ranks), flat: no
  // host domain, every rank treated as remote; run by `algorithm`
  // (chooseStepAlgorithm for the TCP route).
  Comm subComm(Transport& sub, Algorithm algorithm) {
    return Comm(sub, context_, sig_, seq_, algorithm, scratch_);
  }
  // The same call with its messages (and on-host rounds) carrying
  // `sig` instead, from phase 0: the agreement step's records.
  Comm withSignature(const MessageSignature& sig) {
    return Comm(transport_, context_, sig, seq_, algorithm_, scratch_, locality_, Unannounced{});
  }

  // Uninitialised temporary memory for this call (reused across calls).
  uint8_t* scratch(Scratch slot, size_t bytes) { return scratch_.get(slot, bytes); }
  ScratchArena& scratchArena() { return scratch_; }

  // Post without waiting; the request is also remembered for waitAll().
  RequestPtr send(int peer, uint32_t step, const void* data, size_t bytes);
  RequestPtr recv(int peer, uint32_t step, void* data, size_t bytes);
  // Waits for the given requests.
  void wait(std::span<const RequestPtr> requests);
  // Waits for every request posted since the last waitAll().
  void waitAll();
  // Post a send and a receive for the same step and wait for both.
  void sendRecv(int sendPeer, const void* sendData, size_t sendBytes, int recvPeer,
                void* recvData, size_t recvBytes, uint32_t step);

  // Starts a new phase: step numbers restart, tags stay distinct. An
  // algorithm built from others (reduce = reduce-scatter + gather) calls
  // this between them. Each phase has kStepsPerPhase steps.
  void nextPhase();
  static constexpr uint32_t kStepsPerPhase = 1u << 16;

 private:
  // A further view of a call already announced.
  struct Unannounced {};
  Comm(Transport& transport, OpContext context, MessageSignature sig, uint64_t seq,
       Algorithm algorithm, ScratchArena& scratch, Locality locality, Unannounced);

  Transport& transport_;
  OpContext context_;
  MessageSignature sig_;
  uint64_t seq_;
  Algorithm algorithm_;
  uint32_t phaseBase_ = 0;
  ScratchArena& scratch_;
  Locality locality_;
  std::vector<RequestPtr> posted_;
};

}  // namespace meshcomm
