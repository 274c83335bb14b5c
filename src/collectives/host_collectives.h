// HostCollectives: the collectives an on-host kind runs among the ranks of
// one host, on their domain (transport/host_domain.h), without messages.
// The families call this interface when a call's algorithm is on-host
// (Algorithm::kOnHost, the all_reduce's kShm* ones) and for the host part
// of a hierarchical call; the agreement step exchanges its records through
// shareRecords. Each kind implements it in its folder under src/host/ and
// registers it there (src/host/registry.cc); the runtime gives every call
// the collectives of its group's domain (Comm::host()).
//
// Ranks named here (roots) are local ranks of the domain; buffers and sizes
// are as in collectives.h. The first round of every call checks every
// rank's signature, so ranks that disagree on the call fail with Mismatch
// instead of waiting for each other.
//
// Thread-safety: run by the group's executor, one call at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "collectives/blocks.h"
#include "collectives/scratch.h"
#include "collectives/tuning.h"
#include "common/function_ref.h"
#include "meshcomm/types.h"
#include "transport/host_domain.h"
#include "transport/transport.h"

namespace meshcomm {

// One call (or one step of it) on a domain: the rounds carry `sig`.
struct HostCall {
  HostDomain& domain;
  const OpContext& context;
  MessageSignature sig;
};

class HostCollectives {
 public:
  virtual ~HostCollectives() = default;

  // The agreement step's records (collectives/agreement.h): `write` fills
  // this rank's (recordBytes() writable bytes, 64-bit aligned), and every
  // rank hands every other its record's `digest` (one word) beside it;
  // `read` gets every rank's record and digest, indexed by group rank, once
  // all are in. The records stay valid only during `read`, and a record
  // costs its transfer between ranks only if `read` looks at it: the
  // digests decide whether it needs to (collectives/records.cc).
  using Records = std::span<const int64_t* const>;
  using Digests = std::span<const uint64_t>;
  struct Agreement {
    FunctionRef<void(int64_t*)> write;
    uint64_t digest;
    FunctionRef<void(Records, Digests)> read;
  };

  // `algorithm`: the table's choice among the on-host all_reduce algorithms
  // (collectives/tuning.h); a kind without one of them runs its nearest.
  virtual void allReduce(const HostCall& call, void* data, size_t count, DType dtype, ReduceOp op,
                         Algorithm algorithm, ScratchArena& scratch) const = 0;
  // `agreement`: as allToAll's; the root's first round waits for every
  // record, the later ones run ahead as without.
  virtual void broadcast(const HostCall& call, void* data, size_t bytes, int root,
                         const Agreement* agreement) const = 0;
  // `agreement`: as broadcast's.
  virtual void reduce(const HostCall& call, void* data, size_t count, DType dtype, ReduceOp op,
                      int root, const Agreement* agreement) const = 0;
  // `agreement`: as allToAll's (the uneven forms' split sizes).
  virtual void allGather(const HostCall& call, const void* input, size_t inputBytes,
                         std::span<const Block> outputs, const Agreement* agreement) const = 0;
  virtual void reduceScatter(const HostCall& call, const void* input,
                             std::span<const size_t> blockCounts, void* output, DType dtype,
                             ReduceOp op, const Agreement* agreement) const = 0;
  // `agreement`: as broadcast's.
  virtual void gather(const HostCall& call, const void* input, size_t inputBytes,
                      std::span<const Block> outputs, int root,
                      const Agreement* agreement) const = 0;
  virtual void scatter(const HostCall& call, std::span<const Block> inputs, void* output,
                       size_t outputBytes, int root, const Agreement* agreement) const = 0;
  // With `agreement`, the records travel in the call's first round with
  // the first blocks, and `agreement->read` runs once every rank's is in,
  // before this rank reads any block: a `read` that throws ends the call
  // on every rank that throws, with no block delivered anywhere. Null: no
  // records.
  virtual void allToAll(const HostCall& call, std::span<const Block> sends,
                        std::span<const Block> recvs, const Agreement* agreement) const = 0;
  virtual void barrier(const HostCall& call) const = 0;

  // The host's part of a hierarchical all_reduce, whose leader `root` also
  // exchanges with other hosts: the host's sum of `data` into the root's
  // `result` (every `data` read only), and the root's final `data` to every
  // local rank, each in rounds suited to a root with other work.
  virtual void reduceForLeader(const HostCall& call, const void* data, void* result, size_t count,
                               DType dtype, ReduceOp op, int root) const = 0;
  virtual void broadcastFromLeader(const HostCall& call, void* data, size_t bytes,
                                   int root) const = 0;

  // The agreement step's exchange in a round of its own.
  virtual size_t recordBytes() const = 0;
  virtual void shareRecords(const HostCall& call, const Agreement& agreement) const = 0;
};

}  // namespace meshcomm
