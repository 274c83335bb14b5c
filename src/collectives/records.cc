// The records of the agreement step (records.h): their layout, digest,
// verdict and exchange over messages.
#include "collectives/records.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <sstream>
#include <string>

#include "common/mix.h"
#include "transport/transport.h"

namespace meshcomm::collectives::records {
namespace {

void encodeHeader(const CallArguments& a, int64_t* w) {
  w[kDtype] = static_cast<int64_t>(a.dtype);
  w[kCount] = static_cast<int64_t>(a.count);
  w[kReduceOp] = static_cast<int64_t>(a.op);
  w[kRoot] = a.root;
  w[kSplits] = static_cast<int64_t>(a.splits.size());
  w[kSendSplits] = static_cast<int64_t>(a.sendSplits.size());
  w[kRecvSplits] = static_cast<int64_t>(a.recvSplits.size());
}

}  // namespace

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

size_t dataBytes(const std::vector<int64_t>& record) {
  return static_cast<size_t>(record[kCount]) * dtypeSize(static_cast<DType>(record[kDtype]));
}

namespace {

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
    return pair(info.splitsName, listOf(ta.splits, ta.splitCount),
                listOf(tb.splits, tb.splitCount));
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
  if (!info.exchangesSplits()) return true;
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

// The same verdict on every rank: every rank holds the same records.
void judge(const Comm& comm, const OperationInfo& info, std::span<const int64_t* const> records) {
  if (recordsAgree(info, records)) [[likely]] return;
  std::string why;
  for (size_t r = 1; r < records.size() && why.empty(); ++r) {
    why = headerDifference(info, records[0], 0, records[r], static_cast<int>(r));
  }
  if (why.empty() && info.exchangesSplits()) why = exchangeDifference(records);
  if (why.empty()) return;
  throw ArgumentsDisagree(comm.context().describe() + ": the ranks are not running the same operation: " +
                          why + " (ranks numbered within the group). Nothing was sent and the group is still usable; "
                          "every rank must pass the same values");
}

// Whether every rank's recordDigest() says the records agree: all the same,
// or, for all_to_all_single, a sum of zero.
bool digestsAgree(const OperationInfo& info, HostCollectives::Digests digests) {
  if (info.exchangesSplits()) {
    uint64_t sum = 0;
    for (uint64_t d : digests) sum += d;  // modulo 2^64
    return sum == 0;
  }
  for (uint64_t d : digests) {
    if (d != digests[0]) return false;
  }
  return true;
}

}  // namespace

// This rank's record in one word, for HostCollectives::Agreement: the
// words of records that recordsAgree() would pass are the same (a sum of
// zero for all_to_all_single), and those of records that differ are not,
// but for a chance of 2^-64. For all_to_all_single every pair's term is
// added by its sender and subtracted by its receiver, each with its own
// dtype: the sum cancels exactly when what each rank sends another is
// what that one expects, in the same dtype.
uint64_t recordDigest(const OperationInfo& info, const CallArguments& a, int rank) {
  if (info.exchangesSplits()) {
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

// One message from every rank to every other. `alongside(peer)`, if set,
// posts what goes to `peer` in the same write as the record.
std::vector<std::vector<int64_t>> exchangeByMessages(Comm& comm, const std::vector<int64_t>& mine,
                                                     const std::function<void(int)>& alongside) {
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

}  // namespace meshcomm::collectives::records
