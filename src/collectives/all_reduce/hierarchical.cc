// all_reduce across hosts: the host's reduce to the leader, all_reduce
// among leaders, the host's broadcast from the leader.
//
// Between two hosts a large buffer goes in pieces, pipelined: while the
// leaders' exchange of piece k is in the sockets, the host reduces piece
// k+1 and broadcasts piece k-1 in shared memory. Done one phase after the
// other, the link idles during both shared-memory phases, which on a
// 1 Gbit/s link cost as much as a fifth of the call (docs/tuning.md).
//
// A leader sums its host in scratch and copies the result to its output
// only once the leaders' all_reduce succeeded: that exchange is where ranks
// on different hosts first compare signatures, so a rank elsewhere that
// disagrees (a different op or count) leaves every output as it was. The
// other ranks of a host write their outputs only in the final broadcast,
// which starts after their leader's exchange succeeded.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/all_reduce/variants.h"
#include "collectives/blocks.h"
#include "collectives/collectives.h"
#include "collectives/hierarchical/leaders.h"
#include "reduce/reduce.h"
#include "transport/subset_transport.h"

namespace meshcomm::collectives::hierarchical {
namespace {

// Two hosts, `pieces` of the buffer in flight one after the other. Each
// leader sends its host's sum of a piece to the other leader and adds the
// other host's sum to its own: a leader's link carries the buffer once in
// each direction, as the ring's would, in one step instead of two, and
// both leaders add the same two values (op is commutative), so every rank
// ends with identical bits.
//
// A leader sums its host's piece in scratch, not in its output, and writes
// the output only once the other leader's sum of that piece arrived (its
// signature checked): so here too a rank of the other host that disagrees
// leaves every output as it was.
void pipelinedPair(Comm& comm, uint8_t* data, DType dtype, ReduceOp op,
                   const std::vector<int>& leaders, const std::vector<Chunk>& pieces) {
  const int leader = localLeader(comm, leaders);
  const bool lead = isLeader(comm, leaders);
  const int otherLeader = comm.rank() == leaders[0] ? leaders[1] : leaders[0];
  const bool shared = comm.hasHostDomain();  // false on a host of one rank
  const size_t es = dtypeSize(dtype);
  size_t maxPiece = 0;
  for (const Chunk& c : pieces) maxPiece = std::max(maxPiece, c.count);
  std::vector<RequestPtr> sent(pieces.size()), received(pieces.size());
  // Receives alternate between two staging areas: piece k+1's lands in the
  // one piece k-1 has left.
  uint8_t* staging = lead ? comm.scratch(Scratch::kRecv, 2 * maxPiece * es) : nullptr;
  auto stage = [&](size_t k) { return staging + (k % 2) * maxPiece * es; };
  // The host's sums alternate the same way: piece k's is sent from here.
  uint8_t* sums = lead ? comm.scratch(Scratch::kHostPartial, 2 * maxPiece * es) : nullptr;
  auto sum = [&](size_t k) { return sums + (k % 2) * maxPiece * es; };

  // Piece k is final on the leader once the exchange is over and the other
  // host's sum is added (straight into the output, in one pass over both
  // sums); then the host gets it.
  auto finish = [&](size_t k) {
    uint8_t* at = data + pieces[k].offset * es;
    if (lead) {
      const RequestPtr both[] = {sent[k], received[k]};
      comm.wait(both);
      const void* sums[] = {sum(k), stage(k)};
      reduce::reduceInto(op, dtype, at, sums, 2, pieces[k].count);
    }
    if (shared) comm.host().broadcastFromLeader(comm.hostCall(), at, pieces[k].count * es, leader);
  };
  for (size_t k = 0; k < pieces.size(); ++k) {
    // The leader's host sum goes to its scratch; every input stays as it is.
    const uint8_t* mine = data + pieces[k].offset * es;
    if (shared) {
      comm.host().reduceForLeader(comm.hostCall(), mine, lead ? sum(k) : nullptr, pieces[k].count,
                                  dtype, op, leader);
    } else if (lead) {
      std::memcpy(sum(k), mine, pieces[k].count * es);
    }
    if (lead) {
      const auto step = static_cast<uint32_t>(k);
      received[k] = comm.recv(otherLeader, step, stage(k), pieces[k].count * es);
      sent[k] = comm.send(otherLeader, step, sum(k), pieces[k].count * es);
    }
    if (k > 0) finish(k - 1);
  }
  finish(pieces.size() - 1);
  comm.waitAll();  // every request is done; this forgets them
}

}  // namespace

void allReduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) {
  const std::vector<int> leaders = leadersFor(comm.placement(), -1);
  // The same decision on every rank: it depends on the placement and the
  // size alone.
  const size_t piece = hierarchicalPieceBytes(count * dtypeSize(dtype));
  if (leaders.size() == 2 && piece > 0) {
    const std::vector<Chunk> pieces =
        chunksOf(count, std::max<size_t>(1, piece / dtypeSize(dtype)));
    if (pieces.size() > 1 && pieces.size() < Comm::kStepsPerPhase) {
      pipelinedPair(comm, static_cast<uint8_t*>(data), dtype, op, leaders, pieces);
      return;
    }
  }
  const int leader = localLeader(comm, leaders);
  const bool leads = isLeader(comm, leaders);
  const size_t bytes = count * dtypeSize(dtype);
  // The leader sums its host in scratch; every input stays as it is.
  void* host = leads && bytes > 0 ? comm.scratch(Scratch::kHostPartial, bytes) : data;
  if (comm.hasHostDomain()) {
    comm.host().reduceForLeader(comm.hostCall(), data, host, count, dtype, op, leader);
  } else if (host != data) {
    std::memcpy(host, data, bytes);
  }
  if (leads) {
    SubsetTransport among(comm.transport(), leaders);
    Comm across = comm.subComm(
        among, chooseStepAlgorithm(Opcode::kAllReduce, bytes, among.size(), Route::kFlat));
    collectives::allReduce(across, host, count, dtype, op);
    if (host != data) std::memcpy(data, host, bytes);
  }
  if (comm.hasHostDomain()) comm.host().broadcast(comm.hostCall(), data, bytes, leader, nullptr);
}

}  // namespace meshcomm::collectives::hierarchical
