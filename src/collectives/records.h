// The record a rank contributes to the agreement step (agreement.h): what
// it passed for the arguments that must agree, as a list of 64-bit words,
// the one-word digest that stands for it on one host, the verdict every
// rank reaches from all of them, and their exchange over messages. The
// agreement step (agreement.cc) and the calls whose data travels with the
// records over messages (with_records.cc) are made of these.
//
// Thread-safety: run by the group's executor, one call at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "collectives/agreement.h"
#include "collectives/comm.h"
#include "collectives/host_collectives.h"
#include "collectives/operations.h"

namespace meshcomm::collectives::records {

// A record is a list of 64-bit words: a fixed header, the tables, then, for a broadcast, room for a
// payload (kPayloadBytes). Which algorithm a call runs follows from what the records check and
// from settings the ranks compared when they joined (runtime/shared_settings.h), so the
// records need not carry it.
enum Word : size_t { kDtype, kCount, kReduceOp, kRoot, kSplits, kSendSplits, kRecvSplits, kHeader };
constexpr size_t kPayloadWords = kPayloadBytes / sizeof(int64_t);

// The words of `a`'s record without a payload, and the record written
// into `w` (that many words).
size_t recordWords(const CallArguments& a);
void encodeInto(const CallArguments& a, int64_t* w);
// The record as it travels in a message: a broadcast's with room for a
// payload (kPayloadWords), holding it when a.payload is set.
std::vector<int64_t> encode(const CallArguments& a);
// Where a broadcast's record, as encode() made it, holds its payload.
inline const int64_t* payloadOf(const std::vector<int64_t>& record) {
  return record.data() + (record.size() - kPayloadWords);
}

// The tables of a record, as views into it.
struct Tables {
  const int64_t* splits;
  const int64_t* send;
  const int64_t* recv;
  size_t splitCount, sendCount, recvCount;
};
Tables tablesOf(const int64_t* w);

// The bytes of the data the record's rank passed: its count of its dtype.
size_t dataBytes(const std::vector<int64_t>& record);

// This rank's record in one word, for HostCollectives::Agreement; see
// records.cc.
uint64_t recordDigest(const OperationInfo& info, const CallArguments& a, int rank);

// The verdict: returns if every record agrees, else throws
// ArgumentsDisagree naming the argument, two values and their ranks. Every
// rank holds the same records, so every rank reaches the same verdict.
void judge(const Comm& comm, const OperationInfo& info, const std::vector<std::vector<int64_t>>& records);
// The same for records that lie in the host's domain, read only where the
// digests say they differ.
void judgeOnHost(const Comm& comm, const OperationInfo& info, HostCollectives::Records records,
                 HostCollectives::Digests digests);

// The signature the records travel under: see records.cc.
MessageSignature recordSignature(const Comm& comm);

// One message from every rank to every other, each holding its record
// (`mine`); returns every rank's, in rank order. `alongside(peer)`, if
// set, posts what goes to `peer` in the same write as the record.
std::vector<std::vector<int64_t>> exchangeByMessages(Comm& comm, const std::vector<int64_t>& mine,
                                                     const std::function<void(int)>& alongside = {});

}  // namespace meshcomm::collectives::records
