// Agreement: before any byte of a rooted or split-size call moves, every
// rank learns what every other rank passed for the arguments that must
// agree, and all of them reach the same verdict.
//
// Why a separate step: a message's signature catches ranks that disagree
// only when their messages meet. A root that disagrees can mean that no
// message ever meets (every rank naming itself the root of a broadcast
// sends and returns; a rank waiting for a root that thinks it is a leaf
// waits until the deadline), and all_to_all_single's split tables can
// disagree between a pair of ranks while every other pair's data is
// already written. So these calls first exchange a small record of their
// arguments: on one host one round of the host's domain (the records sit
// where the domain shares them, HostCollectives::shareRecords), elsewhere
// one message to every other rank.
// Every rank then holds every record and checks all of them the same way,
// so on a disagreement every rank raises the same ArgumentsDisagree, no
// data has moved, and the group stays usable: the next correct call works.
//
// Calls whose every message carries everything that must agree (all_reduce,
// reduce_scatter, all_gather, barrier) skip this step: their signature
// check is free, and a disagreement there still fails every rank, though
// it breaks the group (docs/errors.md).
//
// Thread-safety: run by the group's executor, one call at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/comm.h"
#include "collectives/operations.h"
#include "common/inline_list.h"
#include "meshcomm/error.h"
#include "meshcomm/types.h"

namespace meshcomm {

// Ranks passed different values for an argument that must agree, and every
// rank found out before any data moved. The group is still usable, so the
// runtime does not abort it for this error.
class ArgumentsDisagree : public Mismatch {
 public:
  using Mismatch::Mismatch;
};

// Per-rank element counts, inline up to 8 ranks.
using Counts = InlineList<int64_t, 8>;

// What one rank passed to a call, for the arguments that must agree.
struct CallArguments {
  Operation operation = Operation::kBarrier;
  DType dtype = DType::kUInt8;
  uint64_t count = 0;             // elements, as the signature counts them
  ReduceOp op = ReduceOp::kSum;   // when the operation reduces
  int root = -1;                  // when the operation is rooted
  // The uneven collectives: the split sizes every rank passes alike.
  Counts splits;
  // all_to_all_single: what this rank sends to / expects from each rank.
  Counts sendSplits;
  Counts recvSplits;
  // A broadcast of at most kPayloadBytes: the data, read at the root and
  // written elsewhere. It travels with the records, so the call needs no
  // other round. Null: no payload.
  void* payload = nullptr;
  size_t payloadBytes = 0;
};

// The largest payload a record carries.
inline constexpr size_t kPayloadBytes = 256;

namespace collectives {

// Whether the checks between ranks that cost something on every call are
// on: this step, and the shared-memory announcement of each call
// (MESHCOMM_CHECK, default on; read once per process).
bool checking();

// Exchanges `mine` with every rank of `comm` and returns if all agree;
// otherwise throws ArgumentsDisagree on every rank, naming the argument,
// two values and the ranks that passed them. Returns whether the call's
// payload was delivered (then the call is done). Starts a new phase of
// `comm`, so the call's own messages never share a tag with the records.
// MESHCOMM_CHECK=0 (the same on every rank) turns the step off.
bool agree(Comm& comm, const CallArguments& mine);

// broadcast: agree() and the broadcast, in as few rounds as the route
// allows. Up to kPayloadBytes the data travels in the records (one round or
// message); above that, on one host, the records ride the broadcast's first
// round and every rank judges them before any rank reads a byte. Over
// messages (TCP, one rank per host) a root of at most kFirstHopBytes sends
// its buffer to the ranks that receive from it directly in the same write
// as its record; they take it in once every record is judged and forward
// it down the tree, so the call waits for no round of records before its
// data moves. Larger buffers, and the hierarchical route: agree(), then the
// broadcast. A disagreement throws ArgumentsDisagree on every rank with
// every rank's data as it was (over messages, after every rank has taken
// in what was sent to it early).
void agreeAndBroadcast(Comm& comm, CallArguments args, void* data, size_t bytes, int root);

// reduce: agree() and the reduce; on one host the records ride the
// reduce's first round, as a large broadcast's do.
void agreeAndReduce(Comm& comm, const CallArguments& args, void* data, size_t count, DType dtype,
                    ReduceOp op, int root);

// gather and scatter (`outputs` / `inputs` read at the root only): agree()
// and the call; on one host the records ride its first round.
void agreeAndGather(Comm& comm, const CallArguments& args, const void* input, size_t inputBytes,
                    std::span<const Block> outputs, int root);
void agreeAndScatter(Comm& comm, const CallArguments& args, std::span<const Block> inputs,
                     void* output, size_t outputBytes, int root);

// The uneven all_gather and reduce_scatter (`args.splits`: every rank's
// block): agree() and the call; on one host the records ride its first
// round, and no output is written before they are judged.
void agreeAndAllGather(Comm& comm, const CallArguments& args, const void* input, size_t inputBytes,
                       std::span<const Block> outputs);
void agreeAndReduceScatter(Comm& comm, const CallArguments& args, const void* input,
                           std::span<const size_t> blockCounts, void* output, DType dtype, ReduceOp op);

// all_to_all_single: agree() and the exchange, in as few rounds as the
// route allows. On one host the records ride the first round of the
// exchange and are judged before any block is read, so a call whose blocks
// fit in one round of the host's domain takes one round. Over messages (TCP, or across hosts) a rank none of whose blocks
// exceeds kEagerBlockBytes sends each peer its block in the same write as
// its record, and the blocks wait in the receivers' inboxes until every
// record is in; a rank with a larger block sends its blocks after the
// verdict. Whether a rank sent early is read from its record, so ranks
// need not agree on it. If the records disagree, nothing is written (over
// messages every rank first drains the blocks sent to it early) and every
// rank throws the same ArgumentsDisagree as agree(). With checks off or
// one rank: the exchange alone.
void agreeAndAllToAll(Comm& comm, const CallArguments& mine, std::span<const Block> sends,
                      std::span<const Block> recvs);

// The largest block a rank sends with its record over messages
// (agreeAndAllToAll).
// Above it, the copy out of the receiver's inbox costs more than the round
// saved: over loopback TCP on 2 cores, 64 KiB blocks took 280-310 us with
// the records against 235-290 us after them, while 32 KiB blocks at 3
// ranks took 63 against 88 us and 16 KiB blocks at 4 ranks 84-167 against
// 134-142 us (meshcomm-bench all_to_all, MESHCOMM_SHM=0, alternating).
inline constexpr size_t kEagerBlockBytes = 32 * 1024;

// The largest buffer a broadcast's root sends with its record over
// messages (agreeAndBroadcast). Above it the receiver's copy out of its
// inbox costs more than the round saved: over loopback TCP at 2 ranks,
// against a limit of 64 KiB, 128 KiB took 0.78x the time, 256 KiB 1.09x and
// 1 MiB 1.10x (meshcomm-bench broadcast, MESHCOMM_SHM=0, 7 alternating
// rounds, docs/benchmarks.md).
inline constexpr size_t kFirstHopBytes = 128 * 1024;

}  // namespace collectives
}  // namespace meshcomm
