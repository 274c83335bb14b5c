// ShmCollectives: each call opens its round view of the group's segment
// (ShmOp) and runs the family's variant (host/shm/variants.h) on it.
#include "host/shm/shm_collectives.h"

#include <vector>

#include "host/shm/rounds.h"
#include "host/shm/slot_stores.h"
#include "host/shm/variants.h"
#include "transport/shm/shm_domain.h"

namespace meshcomm::host {
namespace {

class ShmCollectives final : public HostCollectives {
 public:
  void allReduce(const HostCall& call, void* data, size_t count, DType dtype, ReduceOp op,
                 Algorithm algorithm, ScratchArena& scratch) const override {
    ShmOp rounds = roundsOf(call);
    shm::allReduce(rounds, data, count, dtype, op, algorithm, scratch);
  }
  void broadcast(const HostCall& call, void* data, size_t bytes, int root,
                 const Agreement* agreement) const override {
    ShmOp rounds = roundsOf(call);
    shm::broadcast(rounds, data, bytes, root, agreement);
  }
  void reduce(const HostCall& call, void* data, size_t count, DType dtype, ReduceOp op, int root,
              const Agreement* agreement) const override {
    ShmOp rounds = roundsOf(call);
    shm::reduce(rounds, data, count, dtype, op, root, agreement);
  }
  void allGather(const HostCall& call, const void* input, size_t inputBytes, std::span<const Block> outputs,
                 const Agreement* agreement) const override {
    ShmOp rounds = roundsOf(call);
    shm::allGather(rounds, input, inputBytes, outputs, agreement);
  }
  void reduceScatter(const HostCall& call, const void* input, std::span<const size_t> blockCounts,
                     void* output, DType dtype, ReduceOp op, const Agreement* agreement) const override {
    ShmOp rounds = roundsOf(call);
    shm::reduceScatter(rounds, input, blockCounts, output, dtype, op, agreement);
  }
  void gather(const HostCall& call, const void* input, size_t inputBytes,
              std::span<const Block> outputs, int root, const Agreement* agreement) const override {
    ShmOp rounds = roundsOf(call);
    shm::gather(rounds, input, inputBytes, outputs, root, agreement);
  }
  void scatter(const HostCall& call, std::span<const Block> inputs, void* output, size_t outputBytes,
               int root, const Agreement* agreement) const override {
    ShmOp rounds = roundsOf(call);
    shm::scatter(rounds, inputs, output, outputBytes, root, agreement);
  }
  void allToAll(const HostCall& call, std::span<const Block> sends, std::span<const Block> recvs,
                const Agreement* agreement) const override {
    ShmOp rounds = roundsOf(call);
    shm::allToAll(rounds, sends, recvs, agreement);
  }
  void barrier(const HostCall& call) const override {
    ShmOp rounds = roundsOf(call);
    shm::barrier(rounds);
  }

  // With two ranks on the host the leader adds the other's data to its own
  // in one pass while the other only copies, so the leader, whose network
  // exchange is the longest part of the call, moves two thirds of the bytes
  // the slice-parallel reduce has it move (docs/tuning.md); with more, the
  // slices spread the reduction over them.
  void reduceForLeader(const HostCall& call, const void* data, void* result, size_t count,
                       DType dtype, ReduceOp op, int root) const override {
    ShmOp rounds = roundsOf(call);
    if (rounds.size() <= 2) {
      shm::reduceAtRoot(rounds, data, result, count, dtype, op, root);
    } else {
      shm::reduce(rounds, data, result, count, dtype, op, root);
    }
  }
  void broadcastFromLeader(const HostCall& call, void* data, size_t bytes, int root) const override {
    ShmOp rounds = roundsOf(call);
    shm::broadcast(rounds, data, bytes, root, leaderRoundBytes(rounds));
  }

  size_t recordBytes() const override { return ShmDomain::kCellBytes; }
  // The records lie in the round's cells, read where they are.
  void shareRecords(const HostCall& call, const Agreement& agreement) const override {
    ShmOp rounds = roundsOf(call);
    rounds.beginCell();
    shm::shareRecordsInRound(rounds, agreement);
  }

 private:
  static ShmOp roundsOf(const HostCall& call) {
    // Only the shared-memory kind makes domains of this kind
    // (host/registry.cc looks the collectives up by the domain's kind).
    return ShmOp(static_cast<ShmDomain&>(call.domain), call.context, call.sig);
  }
  // A leader's rounds (reduceForLeader with two ranks, broadcastFromLeader)
  // take the whole slot, which is wider than the chunk only where the
  // host's ranks outnumber its cores: there every round costs context
  // switches: a 64 MiB call between two emulated hosts of two ranks, each
  // host on a core of its own, took 115-137 ms in 2 MiB rounds against
  // 122-141 ms in 512 KiB ones (docs/tuning.md).
  static size_t leaderRoundBytes(const ShmOp& op) {
    return op.size() <= 2 ? op.slotBytes() : op.chunkBytes();
  }
};

}  // namespace

const HostCollectives& shmCollectives() {
  // A malformed MESHCOMM_SHM_SLOT_STORES fails the group's creation, not a
  // collective halfway through its rounds.
  shm::slotStoreSetting();
  static const ShmCollectives kShm;
  return kShm;
}

}  // namespace meshcomm::host
