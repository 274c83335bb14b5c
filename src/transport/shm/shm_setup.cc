#include "transport/shm/shm_setup.h"

#include <unistd.h>

#include <charconv>
#include <optional>

#include "common/crypto.h"
#include "common/env.h"
#include "common/logging.h"
#include "meshcomm/error.h"
#include "transport/shm/shm_domain.h"
#include "transport/shm/shm_transport.h"
#include "transport/shm/single_copy.h"

namespace meshcomm {
namespace {

// Disabled on a host: published instead of a segment name.
constexpr char kOff[] = "-";

// The collectives split a slot into one region per local rank, each at
// least two cache lines.
constexpr int64_t kMinSlotBytesPerRank = 128;

constexpr int64_t kDefaultChunkBytes = 512 * 1024;
// With more ranks than cores every round of a pipeline costs context
// switches, so there the slot is this many chunks wide and all_to_all, whose
// per-peer piece is the slot over P-1, moves up to a chunk per peer and
// round. The other collectives lose with more than a chunk per round
// (docs/tuning.md, "Slot size"), except the hierarchical all_reduce on a
// host of two ranks, whose leader also waits on the network.
constexpr size_t kOversubscribedSlotChunks = 4;

struct SlotSizes {
  size_t slot = 0;   // each rank's buffer per round
  size_t chunk = 0;  // what the collectives other than all_to_all use of it
};

// MESHCOMM_SHM_SLOT_BYTES, when set, is both sizes; unset, the slot widens
// where this host's ranks outnumber its cores. That is the segment
// creator's view alone: the others take the slot size it publishes.
SlotSizes slotSizesFromEnv(int localSize, bool oversubscribed) {
  const std::optional<int64_t> set = envInt("MESHCOMM_SHM_SLOT_BYTES");
  const int64_t v = set.value_or(kDefaultChunkBytes);
  if (v < 4096 || v > (int64_t{1} << 30)) {
    throw InvalidArgument("MESHCOMM_SHM_SLOT_BYTES=" + std::to_string(v) +
                          " is outside [4096, 1 GiB]");
  }
  if (v < kMinSlotBytesPerRank * localSize) {
    throw InvalidArgument("MESHCOMM_SHM_SLOT_BYTES=" + std::to_string(v) + " is too small for " +
                          std::to_string(localSize) + " ranks on one host: set it to at least " +
                          std::to_string(kMinSlotBytesPerRank * localSize) + " (" +
                          std::to_string(kMinSlotBytesPerRank) + " bytes per rank) or leave it unset");
  }
  SlotSizes sizes;
  sizes.chunk = static_cast<size_t>(v);
  sizes.slot = !set && oversubscribed ? sizes.chunk * kOversubscribedSlotChunks : sizes.chunk;
  return sizes;
}

// What a host's first member publishes: "<slot bytes> <segment name>", or
// kOff.
std::string describeSegment(size_t slotBytes, const std::string& name) {
  return std::to_string(slotBytes) + " " + name;
}
bool parseSegment(const std::string& value, size_t& slotBytes, std::string& name) {
  const size_t space = value.find(' ');
  if (space == std::string::npos || space + 1 == value.size()) return false;
  const char* end = value.data() + space;
  auto [ptr, ec] = std::from_chars(value.data(), end, slotBytes);
  if (ec != std::errc() || ptr != end) return false;
  name = value.substr(space + 1);
  return true;
}

// Each ordered pair of local ranks gets a ring of this size for
// point-to-point messages. Only the rings of pairs that talk are ever
// touched, so the reservation grows as localSize^2 only in address space;
// it is still capped so that a host with many ranks does not ask for more
// /dev/shm than any machine has.
size_t ringBytesFromEnv(int localSize) {
  constexpr int64_t kDefault = 512 * 1024;
  constexpr size_t kAllRings = size_t{1} << 30;
  int64_t v = envIntOr("MESHCOMM_SHM_P2P_BYTES", kDefault);
  if (v < 4096 || v > (int64_t{1} << 30)) {
    throw InvalidArgument("MESHCOMM_SHM_P2P_BYTES=" + std::to_string(v) +
                          " is outside [4096, 1 GiB]");
  }
  const auto pairs = static_cast<size_t>(localSize) * static_cast<size_t>(localSize);
  size_t bytes = std::min(static_cast<size_t>(v), std::max<size_t>(4096, kAllRings / pairs));
  return bytes / 4096 * 4096;
}

// Job-unique, readable, and found by meshrun's clean-up (which removes
// /dev/shm/meshcomm-*<job id>* when a job ends).
std::string segmentName(const std::string& groupName) {
  std::string job = envString("MESHCOMM_JOB_ID").value_or("");
  if (job.empty() || job.find('/') != std::string::npos) job = std::to_string(::getpid());
  std::string name = "/meshcomm-";
  name += job;
  name += '-';
  name += sha1Hex(groupName).substr(0, 12);
  name += '-';
  const std::vector<uint8_t> nonce = randomBytes(6);
  name += hexOf(nonce.data(), nonce.size());
  return name;
}

// Whether every local rank can read every other's memory: each publishes
// its pid and probe address, probes all the others and publishes the
// verdict; all take the same decision from the same verdicts.
bool probeSingleCopy(const LinkSetup& o, const std::vector<int>& locals) {
  const bool wanted = envBool("MESHCOMM_SHM_SINGLE_COPY", true);
  const std::string me = std::to_string(o.groupRank);
  std::string mine = std::to_string(::getpid()) + " " +
                     std::to_string(reinterpret_cast<uintptr_t>(single_copy::probeAddress()));
  o.groupStore->set("cma/" + me, mine);
  std::vector<std::string> where, verdicts;
  for (int r : locals) {
    where.push_back("cma/" + std::to_string(r));
    verdicts.push_back("cma_ok/" + std::to_string(r));
  }
  o.groupStore->wait(where, o.timeout);
  bool ok = wanted;
  std::vector<Bytes> values = o.groupStore->multiGet(where);
  for (size_t i = 0; i < locals.size() && ok; ++i) {
    if (locals[i] == o.groupRank) continue;
    std::string v(values[i].begin(), values[i].end());
    size_t space = v.find(' ');
    if (space == std::string::npos) {
      ok = false;
      break;
    }
    pid_t pid = static_cast<pid_t>(std::stol(v.substr(0, space)));
    uintptr_t address = static_cast<uintptr_t>(std::stoull(v.substr(space + 1)));
    ok = single_copy::probe(pid, address);
  }
  o.groupStore->set("cma_ok/" + me, std::string(ok ? "1" : "0"));
  o.groupStore->wait(verdicts, o.timeout);
  for (const Bytes& v : o.groupStore->multiGet(verdicts)) {
    if (v.size() != 1 || v[0] != '1') return false;
  }
  return true;
}

}  // namespace

Link setUpSharedMemoryLink(const LinkSetup& o) {
  Link result;
  const Placement& pl = o.placement;
  std::vector<std::string> keys;  // one per host with several members
  for (size_t h = 0; h < pl.hosts.size(); ++h) {
    if (pl.hosts[h].size() >= 2) keys.push_back("shm/" + std::to_string(h));
  }
  if (keys.empty()) return result;

  const int myHost = pl.hostOf[static_cast<size_t>(o.groupRank)];
  const std::vector<int>& locals = pl.hosts[static_cast<size_t>(myHost)];
  const int localSize = static_cast<int>(locals.size());
  SlotSizes sizes = slotSizesFromEnv(localSize, o.oversubscribed);
  const size_t ringBytes = ringBytesFromEnv(localSize);
  const std::string myKey = "shm/" + std::to_string(myHost);

  std::optional<ShmSegment> created;
  if (localSize >= 2 && locals.front() == o.groupRank) {
    std::string published = kOff;
    if (envBool("MESHCOMM_SHM", true)) {
      std::string name = segmentName(o.groupName);
      try {
        created.emplace(
            ShmSegment::create(name, ShmDomain::segmentBytes(localSize, sizes.slot, ringBytes)));
        ShmDomain::format(created->data(), localSize, sizes.slot, sizes.chunk, ringBytes);
        published = describeSegment(sizes.slot, name);
      } catch (const Error& e) {
        MESHCOMM_LOG(kWarn, "group " << o.groupName << ": shared memory unavailable, using "
                                        << "TCP within this host: " << e.what());
      }
    }
    o.groupStore->set(myKey, published);
  }
  try {
    o.groupStore->wait(keys, o.timeout);
  } catch (const Timeout&) {
    throw Timeout("creating group " + o.groupName + ": a host's first member did not set up " +
                  "shared memory within " + std::to_string(o.timeout.count()) + " ms");
  }
  std::string myName;
  std::vector<Bytes> values = o.groupStore->multiGet(keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string value(values[i].begin(), values[i].end());
    if (value == kOff) return result;  // some host cannot: nobody does
    if (keys[i] == myKey && !parseSegment(value, sizes.slot, myName)) {
      throw Error("creating group " + o.groupName + ": malformed shared-memory entry '" + value +
                  "' in the store (ranks of different meshcomm versions?)");
    }
  }
  result.hostDomainsInUse = true;
  if (localSize < 2) return result;

  ShmDomainOptions d;
  d.groupName = o.groupName;
  for (int i = 0; i < localSize; ++i) {
    if (locals[static_cast<size_t>(i)] == o.groupRank) d.localRank = i;
    d.groupRanks.push_back(locals[static_cast<size_t>(i)]);
    d.worldRanks.push_back(o.worldRanks[static_cast<size_t>(locals[static_cast<size_t>(i)])]);
  }
  d.slotBytes = sizes.slot;
  d.chunkBytes = sizes.chunk;
  d.ringBytes = ringBytes;
  // An idle core per rank: spin, since the peer is probably running. More
  // ranks than cores: the peer we wait for may need our core, so yield at
  // once and sleep soon.
  int64_t spinUs = envIntOr("MESHCOMM_SPIN_US", o.oversubscribed ? 0 : 50);
  int64_t yieldUs = envIntOr("MESHCOMM_SHM_YIELD_US", o.oversubscribed ? 200 : 1000);
  d.spin = std::chrono::microseconds(std::max<int64_t>(0, spinUs));
  d.yield = std::chrono::microseconds(std::max<int64_t>(0, yieldUs));
  d.monitor = o.monitor;
  d.describeSignature = o.describeSignature;
  ShmSegment segment =
      created ? std::move(*created)
              : ShmSegment::open(myName, ShmDomain::segmentBytes(localSize, sizes.slot, ringBytes));
  auto domain = std::make_unique<ShmDomain>(std::move(d), std::move(segment));
  domain->setSingleCopy(probeSingleCopy(o, locals));

  // Point-to-point messages to the ranks of this host go through the
  // domain's rings too.
  std::vector<int> localOf(o.worldRanks.size(), -1);
  result.reaches.assign(o.worldRanks.size(), false);
  for (int i = 0; i < localSize; ++i) {
    const int member = locals[static_cast<size_t>(i)];
    localOf[static_cast<size_t>(member)] = i;
    result.reaches[static_cast<size_t>(member)] = member != o.groupRank;
  }
  result.transport = std::make_unique<ShmTransport>(*domain, o.groupRank, std::move(localOf),
                                                    o.matcher, o.describeSignature);
  result.hostDomain = std::move(domain);
  return result;
}

}  // namespace meshcomm
