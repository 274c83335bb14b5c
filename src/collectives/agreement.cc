#include "collectives/agreement.h"

#include <cstring>
#include <vector>

#include "collectives/records.h"
#include "collectives/with_records.h"
#include "common/env.h"

namespace meshcomm::collectives {
namespace {

using records::encode;
using records::encodeInto;
using records::exchangeByMessages;
using records::judge;
using records::judgeOnHost;
using records::recordDigest;
using records::recordSignature;
using records::recordWords;

// Whether a call's record (and a broadcast's payload) fits its place in
// the host's domain.
bool fitsOnHost(const Comm& comm, const CallArguments& a) {
  const size_t words = recordWords(a);
  return comm.route() == Route::kOnHost && comm.hasHostDomain() &&
         words * sizeof(int64_t) + a.payloadBytes <= comm.host().recordBytes();
}

// The exchange and judge() for a call on one host, judged where the
// records lie (HostCollectives::shareRecords): each rank writes its record
// (and a broadcast's payload after it) straight into its place in the
// domain and reads the others' in theirs. Returns whether the payload was
// delivered.
bool agreeOnHost(Comm& comm, const CallArguments& args) {
  const size_t words = recordWords(args);
  bool delivered = false;
  auto write = [&](int64_t* mine) {
    encodeInto(args, mine);
    if (args.payload != nullptr && args.payloadBytes > 0) {
      std::memcpy(mine + words, args.payload, args.payloadBytes);
    }
  };
  const OperationInfo& info = operationInfo(args.operation);
  auto read = [&](HostCollectives::Records records, HostCollectives::Digests digests) {
    judgeOnHost(comm, info, records, digests);
    if (args.payload == nullptr) return;
    // The records agree, so every rank names the same root and count.
    if (comm.rank() != args.root && args.payloadBytes > 0) {
      std::memcpy(args.payload, records[static_cast<size_t>(args.root)] + words, args.payloadBytes);
    }
    delivered = true;
  };
  comm.host().shareRecords(comm.hostCall(recordSignature(comm)),
                           {write, recordDigest(info, args, comm.rank()), read});
  return delivered;
}

}  // namespace

bool checking() {
  static const bool on = envBool("MESHCOMM_CHECK", true);
  return on;
}

bool agree(Comm& comm, const CallArguments& args) {
  if (!checking()) return false;
  bool delivered = false;
  if (comm.size() > 1 && fitsOnHost(comm, args)) {
    delivered = agreeOnHost(comm, args);
  } else if (comm.size() > 1) {
    const std::vector<int64_t> mine = encode(args);
    const auto records = exchangeByMessages(comm, mine);
    judge(comm, operationInfo(args.operation), records);
    if (args.payload != nullptr) {
      // The headers agree, so the root's data was small enough too.
      const std::vector<int64_t>& root = records[static_cast<size_t>(args.root)];
      if (comm.rank() != args.root) {
        std::memcpy(args.payload, records::payloadOf(root), args.payloadBytes);
      }
      delivered = true;
    }
  }
  comm.nextPhase();
  return delivered;
}

namespace {

// Whether a call's records can ride the first round of its own on-host
// algorithm.
bool recordsRideTheCall(const Comm& comm, const CallArguments& args) {
  return checking() && comm.size() > 1 && comm.algorithm() == Algorithm::kOnHost &&
         fitsOnHost(comm, args);
}

// Whether a gather or scatter runs its schedule over messages, checked:
// then its data can travel with the records (with_records.h).
bool overMessages(const Comm& comm) {
  return checking() && comm.size() > 1 && comm.algorithm() == Algorithm::kLinear;
}

using OnHost = FunctionRef<void(const HostCollectives::Agreement*, const HostCall&)>;

// A call whose arguments must agree: on one host, `onHost` with the records
// of `args` riding its first round (recordsRideTheCall); elsewhere agree(),
// then `elsewhere`.
void agreeThen(Comm& comm, const CallArguments& args, OnHost onHost, FunctionRef<void()> elsewhere) {
  if (!recordsRideTheCall(comm, args)) {
    agree(comm, args);
    elsewhere();
    return;
  }
  const OperationInfo& info = operationInfo(args.operation);
  auto write = [&](int64_t* mine) { encodeInto(args, mine); };
  auto read = [&](HostCollectives::Records records, HostCollectives::Digests digests) {
    judgeOnHost(comm, info, records, digests);
  };
  const HostCollectives::Agreement agreement{write, recordDigest(info, args, comm.rank()), read};
  onHost(&agreement, comm.hostCall(recordSignature(comm)));
}

}  // namespace

void agreeAndBroadcast(Comm& comm, CallArguments args, void* data, size_t bytes, int root) {
  if (checking() && comm.size() > 1 && comm.route() == Route::kFlat) {
    broadcastOverMessages(comm, args, data, bytes, root);
    return;
  }
  if (bytes <= kPayloadBytes) {
    // Small data travels in the records themselves, on every route.
    args.payload = data;
    args.payloadBytes = bytes;
    if (!agree(comm, args)) broadcast(comm, data, bytes, root);
    return;
  }
  agreeThen(
      comm, args,
      [&](const HostCollectives::Agreement* a, const HostCall& call) {
        comm.host().broadcast(call, data, bytes, root, a);
      },
      [&] { broadcast(comm, data, bytes, root); });
}

void agreeAndReduce(Comm& comm, const CallArguments& args, void* data, size_t count, DType dtype,
                    ReduceOp op, int root) {
  agreeThen(
      comm, args,
      [&](const HostCollectives::Agreement* a, const HostCall& call) {
        comm.host().reduce(call, data, count, dtype, op, root, a);
      },
      [&] { reduce(comm, data, count, dtype, op, root); });
}

void agreeAndGather(Comm& comm, const CallArguments& args, const void* input, size_t inputBytes,
                    std::span<const Block> outputs, int root) {
  if (overMessages(comm)) {
    gatherOverMessages(comm, args, input, inputBytes, outputs, root);
    return;
  }
  agreeThen(
      comm, args,
      [&](const HostCollectives::Agreement* a, const HostCall& call) {
        comm.host().gather(call, input, inputBytes, outputs, root, a);
      },
      [&] { gather(comm, input, inputBytes, outputs, root); });
}

void agreeAndScatter(Comm& comm, const CallArguments& args, std::span<const Block> inputs,
                     void* output, size_t outputBytes, int root) {
  if (overMessages(comm)) {
    scatterOverMessages(comm, args, inputs, output, outputBytes, root);
    return;
  }
  agreeThen(
      comm, args,
      [&](const HostCollectives::Agreement* a, const HostCall& call) {
        comm.host().scatter(call, inputs, output, outputBytes, root, a);
      },
      [&] { scatter(comm, inputs, output, outputBytes, root); });
}

void agreeAndAllGather(Comm& comm, const CallArguments& args, const void* input, size_t inputBytes,
                       std::span<const Block> outputs) {
  agreeThen(
      comm, args,
      [&](const HostCollectives::Agreement* a, const HostCall& call) {
        comm.host().allGather(call, input, inputBytes, outputs, a);
      },
      [&] { allGather(comm, input, inputBytes, outputs); });
}

void agreeAndReduceScatter(Comm& comm, const CallArguments& args, const void* input,
                           std::span<const size_t> blockCounts, void* output, DType dtype, ReduceOp op) {
  agreeThen(
      comm, args,
      [&](const HostCollectives::Agreement* a, const HostCall& call) {
        comm.host().reduceScatter(call, input, blockCounts, output, dtype, op, a);
      },
      [&] { reduceScatter(comm, input, blockCounts, output, dtype, op); });
}

void agreeAndAllToAll(Comm& comm, const CallArguments& args, std::span<const Block> sends,
                      std::span<const Block> recvs) {
  if (!checking() || comm.size() < 2) {
    allToAll(comm, sends, recvs);
  } else if (comm.route() != Route::kOnHost) {
    allToAllOverMessages(comm, args, sends, recvs);
  } else {
    // On one host the call takes as many rounds as without records, and no
    // block is read before they agree.
    agreeThen(
        comm, args,
        [&](const HostCollectives::Agreement* a, const HostCall& call) {
          comm.host().allToAll(call, sends, recvs, a);
        },
        [&] { allToAll(comm, sends, recvs); });
  }
}

}  // namespace meshcomm::collectives
