#include "collectives/agreement.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <span>
#include <sstream>
#include <string>

#include "common/env.h"
#include "common/mix.h"

namespace meshcomm::collectives {
namespace {

// A record is a list of 64-bit words: a fixed header, the tables, then, for a broadcast, room for a
// payload (kPayloadBytes). Which algorithm a call runs follows from what the records check and
// from settings the ranks compared when they joined (runtime/shared_settings.h), so the
// records need not carry it.
enum Word : size_t { kDtype, kCount, kReduceOp, kRoot, kSplits, kSendSplits, kRecvSplits, kHeader };
constexpr size_t kPayloadWords = kPayloadBytes / sizeof(int64_t);

void encodeHeader(const CallArguments& a, int64_t* w) {
  w[kDtype] = static_cast<int64_t>(a.dtype);
  w[kCount] = static_cast<int64_t>(a.count);
  w[kReduceOp] = static_cast<int64_t>(a.op);
  w[kRoot] = a.root;
  w[kSplits] = static_cast<int64_t>(a.splits.size());
  w[kSendSplits] = static_cast<int64_t>(a.sendSplits.size());
  w[kRecvSplits] = static_cast<int64_t>(a.recvSplits.size());
}

size_t recordWords(const CallArguments& a) {
  return kHeader + a.splits.size() + a.sendSplits.size() + a.recvSplits.size();
}

// The header and the tables into `w` (recordWords(a) words).
void encodeInto(const CallArguments& a, int64_t* w) {
  encodeHeader(a, w);
  w = std::copy(a.splits.begin(), a.splits.end(), w + kHeader);
  w = std::copy(a.sendSplits.begin(), a.sendSplits.end(), w);
  std::copy(a.recvSplits.begin(), a.recvSplits.end(), w);
}

std::vector<int64_t> encode(const CallArguments& a) {
  std::vector<int64_t> w(recordWords(a));
  encodeInto(a, w.data());
  // Every broadcast's record has room for a payload, so records of ranks
  // that disagree on whether the data is small enough have one size.
  if (a.operation == Operation::kBroadcast) {
    const size_t at = w.size();
    w.resize(at + kPayloadWords, 0);
    if (a.payload != nullptr) std::memcpy(w.data() + at, a.payload, a.payloadBytes);
  }
  return w;
}

// The tables of a record, as views into it.
struct Tables {
  const int64_t* splits;
  const int64_t* send;
  const int64_t* recv;
  size_t splitCount, sendCount, recvCount;
};
Tables tablesOf(const int64_t* w) {
  Tables t{};
  t.splitCount = static_cast<size_t>(w[kSplits]);
  t.sendCount = static_cast<size_t>(w[kSendSplits]);
  t.recvCount = static_cast<size_t>(w[kRecvSplits]);
  t.splits = w + kHeader;
  t.send = t.splits + t.splitCount;
  t.recv = t.send + t.sendCount;
  return t;
}

std::string listOf(const int64_t* v, size_t n) {
  std::ostringstream os;
  os << "[";
  constexpr size_t kShown = 8;
  for (size_t i = 0; i < n && i < kShown; ++i) os << (i ? ", " : "") << v[i];
  if (n > kShown) os << ", ... (" << n << " entries)";
  os << "]";
  return os.str();
}

// What the records of ranks `a` and `b` disagree on, or "" if nothing of
// their headers and shared split tables.
std::string headerDifference(const OperationInfo& info, const int64_t* ra, int a, const int64_t* rb,
                             int b) {
  auto pair = [&](const char* what, const std::string& va, const std::string& vb) {
    return std::string("they pass different ") + what + ": rank " + std::to_string(a) + " passes " +
           va + ", rank " + std::to_string(b) + " passes " + vb;
  };
  auto dtypeOf = [](int64_t v) { return std::string(dtypeName(static_cast<DType>(v))); };
  if (ra[kDtype] != rb[kDtype]) return pair("dtype", dtypeOf(ra[kDtype]), dtypeOf(rb[kDtype]));
  if (info.reduces && ra[kReduceOp] != rb[kReduceOp]) {
    return pair("op", reduceOpName(static_cast<ReduceOp>(ra[kReduceOp])),
                reduceOpName(static_cast<ReduceOp>(rb[kReduceOp])));
  }
  if (info.rooted() && ra[kRoot] != rb[kRoot]) {
    return pair(info.rootName(), std::to_string(ra[kRoot]), std::to_string(rb[kRoot]));
  }
  const Tables ta = tablesOf(ra), tb = tablesOf(rb);
  if (ta.splitCount != tb.splitCount ||
      std::memcmp(ta.splits, tb.splits, ta.splitCount * sizeof(int64_t)) != 0) {
    const char* name = info.operation == Operation::kReduceScatterTensorUneven ? "input_split_sizes"
                                                                              : "output_split_sizes";
    return pair(name, listOf(ta.splits, ta.splitCount), listOf(tb.splits, tb.splitCount));
  }
  if (ra[kCount] != rb[kCount]) {
    return pair("element counts", std::to_string(ra[kCount]), std::to_string(rb[kCount]));
  }
  return "";
}

// What all_to_all_single's split tables disagree on: what some rank sends
// to another differs from what that one expects from it. "" if nothing.
std::string exchangeDifference(std::span<const int64_t* const> records) {
  const int p = static_cast<int>(records.size());
  for (int from = 0; from < p; ++from) {
    const Tables f = tablesOf(records[static_cast<size_t>(from)]);
    for (int to = 0; to < p; ++to) {
      const Tables t = tablesOf(records[static_cast<size_t>(to)]);
      if (f.sendCount != static_cast<size_t>(p) || t.recvCount != static_cast<size_t>(p)) continue;
      const int64_t sends = f.send[to];
      const int64_t expects = t.recv[from];
      if (sends == expects) continue;
      return "they pass split sizes that do not match: rank " + std::to_string(from) + " sends " +
             std::to_string(sends) + " elements to rank " + std::to_string(to) +
             " (its input_split_sizes[" + std::to_string(to) + "]), but rank " +
             std::to_string(to) + " expects " + std::to_string(expects) + " from rank " +
             std::to_string(from) + " (its output_split_sizes[" + std::to_string(from) + "])";
    }
  }
  return "";
}

// Whether nothing of what headerDifference and exchangeDifference look at
// differs, in integer compares alone: the verdict of almost every call,
// reached without building the strings that only a disagreement needs.
// It may only say true where both would return "".
bool recordsAgree(const OperationInfo& info, std::span<const int64_t* const> records) {
  const int64_t* first = records[0];
  const Tables t0 = tablesOf(first);
  for (size_t r = 1; r < records.size(); ++r) {
    const int64_t* w = records[r];
    if (w[kDtype] != first[kDtype] || w[kCount] != first[kCount]) return false;
    if (info.reduces && w[kReduceOp] != first[kReduceOp]) return false;
    if (info.rooted() && w[kRoot] != first[kRoot]) return false;
    const Tables t = tablesOf(w);
    if (t.splitCount != t0.splitCount ||
        std::memcmp(t.splits, t0.splits, t0.splitCount * sizeof(int64_t)) != 0) {
      return false;
    }
  }
  if (info.operation != Operation::kAllToAllSingle) return true;
  const size_t p = records.size();
  for (size_t from = 0; from < p; ++from) {
    const Tables f = tablesOf(records[from]);
    if (f.sendCount != p) continue;
    for (size_t to = 0; to < p; ++to) {
      const Tables t = tablesOf(records[to]);
      if (t.recvCount == p && f.send[to] != t.recv[from]) return false;
    }
  }
  return true;
}

// This rank's record in one word, for HostCollectives::Agreement: the
// words of records that recordsAgree() would pass are the same (a sum of
// zero for all_to_all_single), and those of records that differ are not,
// but for a chance of 2^-64. For all_to_all_single every pair's term is
// added by its sender and subtracted by its receiver, each with its own
// dtype: the sum cancels exactly when what each rank sends another is
// what that one expects, in the same dtype.
uint64_t recordDigest(const OperationInfo& info, const CallArguments& a, int rank) {
  if (info.operation == Operation::kAllToAllSingle) {
    // Ranks below 2^28 and the dtype packed in one word, the count in a
    // second: two mixes a term.
    const uint64_t dtype = static_cast<uint64_t>(a.dtype) << 56;
    auto term = [&](int from, int to, int64_t count) {
      const uint64_t pair = dtype | static_cast<uint64_t>(from) << 28 | static_cast<uint64_t>(to);
      return mixWord(mixWord(pair) ^ static_cast<uint64_t>(count));
    };
    uint64_t sum = 0;
    for (int peer = 0; peer < static_cast<int>(a.sendSplits.size()); ++peer) {
      sum += term(rank, peer, a.sendSplits[static_cast<size_t>(peer)]);
    }
    for (int peer = 0; peer < static_cast<int>(a.recvSplits.size()); ++peer) {
      sum -= term(peer, rank, a.recvSplits[static_cast<size_t>(peer)]);
    }
    return sum;
  }
  const std::array<int64_t, 5> header = {static_cast<int64_t>(a.dtype), static_cast<int64_t>(a.count),
                                         info.reduces ? static_cast<int64_t>(a.op) : 0,
                                         info.rooted() ? a.root : 0, static_cast<int64_t>(a.splits.size())};
  return mixWords(mixWords(0, header), std::span<const int64_t>(a.splits.data(), a.splits.size()));
}

// The same verdict on every rank: every rank holds the same records.
void judge(const Comm& comm, const OperationInfo& info, std::span<const int64_t* const> records) {
  if (recordsAgree(info, records)) [[likely]] return;
  std::string why;
  for (size_t r = 1; r < records.size() && why.empty(); ++r) {
    why = headerDifference(info, records[0], 0, records[r], static_cast<int>(r));
  }
  if (why.empty() && info.operation == Operation::kAllToAllSingle) why = exchangeDifference(records);
  if (why.empty()) return;
  throw ArgumentsDisagree(comm.context().describe() + ": the ranks are not running the same operation: " +
                          why + " (ranks numbered within the group). Nothing was sent and the group is still usable; "
                          "every rank must pass the same values");
}

// Whether every rank's recordDigest() says the records agree: all the same,
// or, for all_to_all_single, a sum of zero.
bool digestsAgree(const OperationInfo& info, HostCollectives::Digests digests) {
  if (info.operation == Operation::kAllToAllSingle) {
    uint64_t sum = 0;
    for (uint64_t d : digests) sum += d;  // modulo 2^64
    return sum == 0;
  }
  for (uint64_t d : digests) {
    if (d != digests[0]) return false;
  }
  return true;
}

// judge() for records that lie in the host's domain: read only where the
// digests differ, which almost never happens, so a call whose ranks agree
// moves no record between them.
void judgeOnHost(const Comm& comm, const OperationInfo& info, HostCollectives::Records records,
                 HostCollectives::Digests digests) {
  if (!digestsAgree(info, digests)) [[unlikely]] judge(comm, info, records);
}

// judge() over records held in vectors.
void judge(const Comm& comm, const OperationInfo& info,
           const std::vector<std::vector<int64_t>>& records) {
  std::vector<const int64_t*> views;
  views.reserve(records.size());
  for (const auto& r : records) views.push_back(r.data());
  judge(comm, info, views);
}

// The signature the records travel under: the call's family alone, so a
// rank running another family, or a call of this family that skips the
// step, fails the usual signature check instead of misreading a record.
MessageSignature recordSignature(const Comm& comm) {
  MessageSignature sig;
  sig.opcode = comm.signature().opcode;
  return sig;
}

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

// One message from every rank to every other. `alongside(peer)`, if set,
// posts what goes to `peer` in the same write as the record.
std::vector<std::vector<int64_t>> exchangeByMessages(Comm& comm, const std::vector<int64_t>& mine,
                                                     const std::function<void(int)>& alongside = {}) {
  Comm records = comm.withSignature(recordSignature(comm));
  const int p = comm.size();
  const size_t bytes = mine.size() * sizeof(int64_t);
  std::vector<std::vector<int64_t>> all(static_cast<size_t>(p), std::vector<int64_t>(mine.size()));
  all[static_cast<size_t>(comm.rank())] = mine;
  SendHold hold(comm.transport());
  for (int peer = 0; peer < p; ++peer) {
    if (peer == comm.rank()) continue;
    records.recv(peer, 0, all[static_cast<size_t>(peer)].data(), bytes);
    records.send(peer, 0, mine.data(), bytes);
    if (alongside) alongside(peer);
  }
  hold.release();
  records.waitAll();
  return all;
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

// After a disagreement on all_to_all_single over messages: takes in the
// blocks peers sent with their records (agreeAndAllToAll), so that nothing
// of the call is left behind and the group stays usable. REQUIRES: `comm`
// is in the phase the blocks were sent in.
void drainEagerBlocks(Comm& comm, const std::vector<std::vector<int64_t>>& records) {
  const int me = comm.rank();
  std::vector<int64_t> bytes(records.size(), -1);
  int64_t total = 0;
  for (size_t peer = 0; peer < records.size(); ++peer) {
    if (static_cast<int>(peer) == me) continue;
    bytes[peer] = eagerBytesTo(records[peer], me);
    total += std::max<int64_t>(0, bytes[peer]);
  }
  uint8_t* drain = comm.scratch(Scratch::kRecv, static_cast<size_t>(total));
  for (size_t peer = 0; peer < records.size(); ++peer) {
    if (bytes[peer] < 0) continue;
    comm.recv(static_cast<int>(peer), 0, drain, static_cast<size_t>(bytes[peer]));
    drain += bytes[peer];
  }
  comm.waitAll();
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
        std::memcpy(args.payload, root.data() + (root.size() - kPayloadWords), args.payloadBytes);
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

namespace {

// The bytes the rank that wrote `record` (`rank`) sends with it to each
// rank that receives from it directly, as the root of a broadcast over
// messages (agreeAndBroadcastByMessages); 0 if none: it does not name
// itself the root, or its buffer travels in the record itself, or is too
// large to send before the verdict. Read from the record, so that every
// rank reaches the same answer.
size_t firstHopBytes(const std::vector<int64_t>& record, int rank) {
  if (record[kRoot] != rank) return 0;
  const size_t bytes = static_cast<size_t>(record[kCount]) * dtypeSize(static_cast<DType>(record[kDtype]));
  return bytes > kPayloadBytes && bytes <= kFirstHopBytes ? bytes : 0;
}

// After a disagreement on a broadcast over messages: takes in what ranks
// naming themselves the root sent this rank with their records, and waits
// for what this rank sent, so that nothing of the call is left behind and
// the group stays usable. REQUIRES: `firstHop` is the phase they were sent in.
void drainFirstHop(Comm& firstHop, const std::vector<std::vector<int64_t>>& records) {
  const int me = firstHop.rank();
  std::vector<size_t> bytes(records.size(), 0);
  size_t total = 0;
  for (size_t peer = 0; peer < records.size(); ++peer) {
    const int sender = static_cast<int>(peer);
    const size_t n = sender == me ? 0 : firstHopBytes(records[peer], sender);
    if (n > 0 && receivesFromRoot(firstHop, n, me, sender)) bytes[peer] = n;
    total += bytes[peer];
  }
  uint8_t* drain = firstHop.scratch(Scratch::kRecv, total);
  for (size_t peer = 0; peer < records.size(); ++peer) {
    if (bytes[peer] == 0) continue;
    firstHop.recv(static_cast<int>(peer), 0, drain, bytes[peer]);
    drain += bytes[peer];
  }
  firstHop.waitAll();
}

// broadcast over messages: see agreeAndBroadcast.
void agreeAndBroadcastByMessages(Comm& comm, CallArguments args, void* data, size_t bytes,
                                 int root) {
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
    const std::vector<int64_t>& fromRoot = records[static_cast<size_t>(root)];
    if (me != root) std::memcpy(data, fromRoot.data() + (fromRoot.size() - kPayloadWords), bytes);
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

}  // namespace

void agreeAndBroadcast(Comm& comm, CallArguments args, void* data, size_t bytes, int root) {
  if (checking() && comm.size() > 1 && comm.route() == Route::kFlat) {
    agreeAndBroadcastByMessages(comm, args, data, bytes, root);
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
  agreeThen(
      comm, args,
      [&](const HostCollectives::Agreement* a, const HostCall& call) {
        comm.host().gather(call, input, inputBytes, outputs, root, a);
      },
      [&] { gather(comm, input, inputBytes, outputs, root); });
}

void agreeAndScatter(Comm& comm, const CallArguments& args, std::span<const Block> inputs,
                     void* output, size_t outputBytes, int root) {
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
                           const std::vector<size_t>& blockCounts, void* output, DType dtype, ReduceOp op) {
  agreeThen(
      comm, args,
      [&](const HostCollectives::Agreement* a, const HostCall& call) {
        comm.host().reduceScatter(call, input, blockCounts, output, dtype, op, a);
      },
      [&] { reduceScatter(comm, input, blockCounts, output, dtype, op); });
}

namespace {

// all_to_all_single over messages: see agreeAndAllToAll.
void agreeAndExchangeByMessages(Comm& comm, const CallArguments& args,
                                std::span<const Block> sends, std::span<const Block> recvs) {
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

}  // namespace

void agreeAndAllToAll(Comm& comm, const CallArguments& args, std::span<const Block> sends,
                      std::span<const Block> recvs) {
  if (!checking() || comm.size() < 2) {
    allToAll(comm, sends, recvs);
  } else if (comm.route() != Route::kOnHost) {
    agreeAndExchangeByMessages(comm, args, sends, recvs);
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
