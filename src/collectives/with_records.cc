// Calls over messages whose data travels with the agreement's records
// (with_records.h).
#include "collectives/with_records.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/records.h"
#include "transport/transport.h"

namespace meshcomm::collectives {
namespace {

using records::encode;
using records::exchangeByMessages;
using records::judge;
using records::kDtype;
using records::kRoot;
using records::payloadOf;
using records::recordSignature;
using records::tablesOf;
using records::Tables;

// The bytes the rank that wrote `record` (`rank`) sends with it to each
// rank that receives from it directly, as the root of a broadcast over
// messages (broadcastOverMessages); 0 if none: it does not name
// itself the root, or its buffer travels in the record itself, or is too
// large to send before the verdict. Read from the record, so that every
// rank reaches the same answer.
size_t firstHopBytes(const std::vector<int64_t>& record, int rank) {
  if (record[kRoot] != rank) return 0;
  const size_t bytes = records::dataBytes(record);
  return bytes > kPayloadBytes && bytes <= kFirstHopBytes ? bytes : 0;
}

// After a disagreement: takes in what each peer sent this rank with its
// record (`bytesFrom[peer]`, -1 for nothing; 0 is an empty message) and
// waits for what this rank sent, so that nothing of the call is left
// behind and the group stays usable. REQUIRES: `comm` is in the phase they
// were sent in.
void drain(Comm& comm, const std::vector<int64_t>& bytesFrom) {
  int64_t total = 0;
  for (int64_t n : bytesFrom) total += std::max<int64_t>(0, n);
  uint8_t* into = comm.scratch(Scratch::kRecv, static_cast<size_t>(total));
  for (size_t peer = 0; peer < bytesFrom.size(); ++peer) {
    if (bytesFrom[peer] < 0) continue;
    comm.recv(static_cast<int>(peer), 0, into, static_cast<size_t>(bytesFrom[peer]));
    into += bytesFrom[peer];
  }
  comm.waitAll();
}

// broadcast: what ranks naming themselves the root sent this rank.
void drainFirstHop(Comm& firstHop, const std::vector<std::vector<int64_t>>& records) {
  const int me = firstHop.rank();
  std::vector<int64_t> bytes(records.size(), -1);
  for (size_t peer = 0; peer < records.size(); ++peer) {
    const int sender = static_cast<int>(peer);
    const size_t n = sender == me ? 0 : firstHopBytes(records[peer], sender);
    if (n > 0 && receivesFromRoot(firstHop, n, me, sender)) bytes[peer] = static_cast<int64_t>(n);
  }
  drain(firstHop, bytes);
}

// The bytes a rank sends to `peer` together with its record, read from the
// record so that its peers reach the same answer; -1 if it sends none
// there (some block of its call is above kEagerBlockBytes).
int64_t eagerBytesTo(const std::vector<int64_t>& record, int peer) {
  const Tables t = tablesOf(record.data());
  const auto elementBytes = static_cast<int64_t>(dtypeSize(static_cast<DType>(record[kDtype])));
  int64_t largest = 0;
  for (size_t i = 0; i < t.sendCount; ++i) largest = std::max(largest, t.send[i] * elementBytes);
  if (largest > static_cast<int64_t>(kEagerBlockBytes)) return -1;
  return t.send[peer] * elementBytes;
}

// all_to_all_single: the blocks peers sent with their records.
void drainEagerBlocks(Comm& comm, const std::vector<std::vector<int64_t>>& records) {
  std::vector<int64_t> bytes(records.size(), -1);
  for (size_t peer = 0; peer < records.size(); ++peer) {
    if (static_cast<int>(peer) != comm.rank()) bytes[peer] = eagerBytesTo(records[peer], comm.rank());
  }
  drain(comm, bytes);
}

// The block a rank sends with its record in a gather (to the rank it
// names the root, every rank but that one) or a scatter (to every other
// rank, the rank naming itself the root): its data, if at most
// kEagerBlockBytes; 0 if none. From the record, so every rank reaches the
// same answer.
size_t earlyBlockBytes(const std::vector<int64_t>& record, int rank, bool gathers) {
  const bool sends = gathers ? record[kRoot] != rank : record[kRoot] == rank;
  const size_t bytes = records::dataBytes(record);
  return sends && bytes > 0 && bytes <= kEagerBlockBytes ? bytes : 0;
}

// gather and scatter: the blocks sent to this rank early.
void drainEarlyBlocks(Comm& early, const std::vector<std::vector<int64_t>>& all, bool gathers) {
  const int me = early.rank();
  std::vector<int64_t> bytes(all.size(), -1);
  for (size_t peer = 0; peer < all.size(); ++peer) {
    const int sender = static_cast<int>(peer);
    const size_t n = sender == me ? 0 : earlyBlockBytes(all[peer], sender, gathers);
    const bool toMe = !gathers || all[peer][kRoot] == me;
    if (n > 0 && toMe) bytes[peer] = static_cast<int64_t>(n);
  }
  drain(early, bytes);
}

// gather (`gathers`) or scatter over messages: `mine` is this rank's block
// (a gather's input, a scatter's output), `blocks` the root's list.
void linearOverMessages(Comm& comm, const CallArguments& args, bool gathers, void* mine, size_t myBytes,
                        std::span<const Block> blocks, int root) {
  const int me = comm.rank();
  const std::vector<int64_t> record = encode(args);
  const bool sendsEarly = earlyBlockBytes(record, me, gathers) > 0;
  // The early blocks travel in a phase of their own under the records'
  // signature, as a broadcast's first hop does.
  Comm early = comm.withSignature(recordSignature(comm));
  early.nextPhase();
  const auto all = exchangeByMessages(comm, record, [&](int peer) {
    if (!sendsEarly) return;
    if (gathers && peer == args.root) early.send(peer, 0, mine, myBytes);
    if (!gathers) {
      const Block& b = blocks[static_cast<size_t>(peer)];
      early.send(peer, 0, b.data, b.bytes);
    }
  });
  try {
    judge(comm, operationInfo(args.operation), all);
  } catch (const ArgumentsDisagree&) {
    drainEarlyBlocks(early, all, gathers);
    throw;
  }
  // The records agree: every rank names the same root and block size, so
  comm.nextPhase();
  comm.nextPhase();
  // the records of the senders say whether the blocks went early.
  const int sender = gathers ? (root + 1) % comm.size() : root;
  const bool wentEarly = earlyBlockBytes(all[static_cast<size_t>(sender)], sender, gathers) > 0;
  if (!wentEarly) {
    if (gathers) {
      gather(comm, mine, myBytes, blocks, root);
    } else {
      scatter(comm, blocks, mine, myBytes, root);
    }
    return;
  }
  if (me == root) {
    for (int j = 0; gathers && j < comm.size(); ++j) {
      const Block& b = blocks[static_cast<size_t>(j)];
      if (j != root) early.recv(j, 0, b.data, b.bytes);
    }
    uint8_t* own = blocks[static_cast<size_t>(root)].data;
    gathers ? moveOwnBlock(own, mine, myBytes) : moveOwnBlock(mine, own, myBytes);
  } else if (!gathers) {
    early.recv(root, 0, mine, myBytes);
  }
  early.waitAll();
}

}  // namespace

void broadcastOverMessages(Comm& comm, CallArguments args, void* data, size_t bytes, int root) {
  const int me = comm.rank();
  if (bytes <= kPayloadBytes) {
    args.payload = data;
    args.payloadBytes = bytes;
  }
  const std::vector<int64_t> mine = encode(args);
  const bool early = firstHopBytes(mine, me) > 0;
  // The first hop travels under the records' signature, in a phase of its
  // own: data that arrives before the records are judged must not be
  // held against its receiver for a dtype they have yet to compare.
  Comm firstHop = comm.withSignature(recordSignature(comm));
  firstHop.nextPhase();
  const auto records = exchangeByMessages(comm, mine, [&](int peer) {
    if (early && receivesFromRoot(comm, bytes, peer, me)) firstHop.send(peer, 0, data, bytes);
  });
  try {
    judge(comm, operationInfo(args.operation), records);
  } catch (const ArgumentsDisagree&) {
    drainFirstHop(firstHop, records);
    throw;
  }
  // The records agree: every rank names the same root, count and dtype.
  if (args.payload != nullptr) {
    if (me != root) std::memcpy(data, payloadOf(records[static_cast<size_t>(root)]), bytes);
    return;
  }
  // Past the records' phase and the first hop's.
  comm.nextPhase();
  comm.nextPhase();
  if (firstHopBytes(records[static_cast<size_t>(root)], root) > 0) {
    broadcastAfterFirstHop(comm, firstHop, data, bytes, root);
  } else {
    broadcast(comm, data, bytes, root);
  }
}

void gatherOverMessages(Comm& comm, const CallArguments& args, const void* input, size_t inputBytes,
                        std::span<const Block> outputs, int root) {
  // A gather only reads `input`; the schedule is written for both directions.
  linearOverMessages(comm, args, true, const_cast<void*>(input), inputBytes, outputs, root);
}

void scatterOverMessages(Comm& comm, const CallArguments& args, std::span<const Block> inputs,
                         void* output, size_t outputBytes, int root) {
  linearOverMessages(comm, args, false, output, outputBytes, inputs, root);
}

void allToAllOverMessages(Comm& comm, const CallArguments& args, std::span<const Block> sends,
                          std::span<const Block> recvs) {
  const int me = comm.rank();
  const std::vector<int64_t> mine = encode(args);
  const bool early = eagerBytesTo(mine, me) >= 0;
  // The blocks travel in the call's first phase, as after agree(), and
  // under the records' signature, early or late: a block that arrives
  // before the records are judged must not be held against its receiver
  // for a dtype the records have yet to compare (they report it, with the
  // group still usable).
  comm.nextPhase();
  Comm blocks = comm.withSignature(recordSignature(comm));
  blocks.nextPhase();
  const auto records = exchangeByMessages(comm, mine, [&](int peer) {
    const Block& b = sends[static_cast<size_t>(peer)];
    if (early) blocks.send(peer, 0, b.data, b.bytes);
  });
  try {
    judge(comm, operationInfo(args.operation), records);
  } catch (const ArgumentsDisagree&) {
    drainEagerBlocks(blocks, records);
    throw;
  }
  if (!early) {
    allToAll(blocks, sends, recvs);
    return;
  }
  copyOwnBlock(sends, recvs, me);
  for (int peer = 0; peer < comm.size(); ++peer) {
    const Block& b = recvs[static_cast<size_t>(peer)];
    if (peer != me) blocks.recv(peer, 0, b.data, b.bytes);
  }
  blocks.waitAll();
}

}  // namespace meshcomm::collectives
