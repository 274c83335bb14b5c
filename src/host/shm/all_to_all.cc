// all_to_all among the ranks of one host, on the shared-memory segment.
#include <algorithm>
#include <cstring>
#include <string>

#include "host/shm/variants.h"
#include "host/shm/rounds.h"
#include "collectives/tuning.h"
#include "common/check.h"

namespace meshcomm::host::shm {

// all_to_all: the slot holds one region per other rank (at P=2 the whole
// slot carries the one peer's block). In the first round each region opens
// with the size of its block and the flag line carries the largest block
// this rank sends, so every receiver checks the sizes sent to it and every
// rank learns how many rounds carry the rest. A block of up to
// kTinyBlock bytes shares the size's line, so a small call costs a receiver
// two lines of each peer, the flag and its region; larger ones start on the
// next line, so the copies of every round run line-aligned. (Misaligned by
// the size's 8 bytes, a 32 KiB call at P=2 took 4.8 us instead of 3.2 and
// a 256 KiB one 31 us instead of 18: every line a copy writes then comes in
// two pieces, each a partial write to a line the peer holds.) A rank whose
// blocks are all the same size and all fit in the flag line together sends
// them there instead (one line per peer), marking the largest so. With
// one peer the flag line's largest block is the only block, and regions
// carry no size.
//
// With the agreement step's records, each rank writes its record into its
// cell in the first round too, and every rank judges them all before it
// reads a block: a call whose ranks disagree ends on every rank with the
// blocks written but never read (the next round overwrites them), and the
// call needs no round of its own for the records (a 64 KiB call at 2 ranks:
// two rounds before, one now).
namespace {

constexpr size_t kTinyBlock = kAlign - sizeof(uint64_t);

size_t regionIndex(int from, int to) { return static_cast<size_t>(to - (to > from ? 1 : 0)); }

// The flag line's largest block, and whether the blocks follow it there.
constexpr uint64_t kBlocksInline = uint64_t{1} << 63;
constexpr size_t kInlineBlockBytes = ShmDomain::kInlineBytes - sizeof(uint64_t);

// Where a block of `bytes` starts in its first-round region, and how many
// of its bytes that round carries. `sizeInFlag`: the region carries no size
// (see allToAll), so the block starts at the region's start.
size_t firstDataOffset(size_t bytes, bool sizeInFlag) {
  if (sizeInFlag) return 0;
  return bytes <= kTinyBlock ? sizeof(uint64_t) : kAlign;
}
size_t firstBytes(size_t bytes, size_t region, bool sizeInFlag) {
  return std::min(bytes, region - firstDataOffset(bytes, sizeInFlag));
}

// A writer's first-round region when its largest block is `largest`: what
// that block and its size need, up to a full `region`. Where that is less,
// the round takes a part of the slot area, and calls rotate through its
// parts (partsFor); each reader works the writer's region and parts out
// from the largest block in the writer's flag line.
size_t firstRegion(uint64_t largest, size_t region, bool sizeInFlag) {
  const size_t needs = (sizeInFlag ? 0 : kAlign) + static_cast<size_t>(std::min<uint64_t>(largest, region));
  return std::min(region, std::max(kAlign, alignUp(needs)));
}

void copyOwn(std::span<const Block> sends, std::span<const Block> recvs, int me, bool stream) {
  const Block& s = sends[static_cast<size_t>(me)];
  const Block& r = recvs[static_cast<size_t>(me)];
  copyOut(r.data, s.data, std::min(s.bytes, r.bytes), stream);
}

}  // namespace

void allToAll(ShmOp& op, std::span<const Block> sends, std::span<const Block> recvs,
              const HostCollectives::Agreement* agreement) {
  const int p = op.size();
  const int me = op.rank();
  const bool stream = streamOutput(totalBytes(recvs));
  if (agreement == nullptr) copyOwn(sends, recvs, me, stream);
  if (p == 1) return;

  // Up to a chunk per peer and round: the slot is wider than a chunk only
  // where rounds are dear (runtime/shm_setup.cc).
  const size_t region =
      alignDown(std::min(op.chunkBytes(), op.slotBytes() / static_cast<size_t>(p - 1)));
  MESHCOMM_CHECK(region >= 2 * kAlign, "shared-memory slot too small for " << p << " ranks");

  const size_t firstPeerBytes = sends[me == 0 ? 1 : 0].bytes;
  uint64_t largest = 0;
  bool uniform = true;
  for (int j = 0; j < p; ++j) {
    if (j == me) continue;
    const size_t bytes = sends[static_cast<size_t>(j)].bytes;
    uniform = uniform && bytes == firstPeerBytes;
    largest = std::max<uint64_t>(largest, bytes);
  }
  const bool sendInline = uniform && largest * static_cast<size_t>(p - 1) <= kInlineBlockBytes;
  // With one peer the flag line's largest block is the block itself, so the
  // region carries data from its first byte, and a block as large as the
  // region takes one round instead of a second one for its last line. (2
  // ranks, 1 MiB against 1 MiB - 128 B, which fit in one round before: 0.88x
  // the time in one run of 16 alternations, 0.97-1.02 in two later ones; the
  // second round had also put every call's large copy in the same half of
  // the slot, whose lines the peer had read the call before.)
  const bool sizeInFlag = p == 2;
  const auto regionsOf = [&](uint64_t largestOfWriter) {
    const size_t first = firstRegion(largestOfWriter, region, sizeInFlag);
    return std::pair{first, partsFor(op, first * static_cast<size_t>(p - 1))};
  };
  const auto [myRegion, myParts] = regionsOf(largest);
  // Blocks in the flag line leave the slot alone, so that round claims none.
  uint8_t* mine = sendInline ? (op.beginReading(), nullptr) : op.begin(myParts);
  uint8_t* line = op.inlineData();
  for (int j = 0; j < p; ++j) {
    if (j == me) continue;
    const Block& s = sends[static_cast<size_t>(j)];
    if (sendInline) {
      copy(line + sizeof(uint64_t) + regionIndex(me, j) * largest, s.data, s.bytes);
      continue;
    }
    uint8_t* entry = mine + regionIndex(me, j) * myRegion;
    if (!sizeInFlag) {
      const auto size = static_cast<uint64_t>(s.bytes);
      std::memcpy(entry, &size, sizeof(size));
    }
    copyIn(op, entry + firstDataOffset(s.bytes, sizeInFlag), s.data,
           firstBytes(s.bytes, myRegion, sizeInFlag));
  }
  const uint64_t mark = largest | (sendInline ? kBlocksInline : 0);
  std::memcpy(line, &mark, sizeof(mark));
  publishWithRecords(op, agreement);
  op.waitAll();
  // With records, judged before any block is read, this rank's own
  // included: ranks that disagree leave every output as it was.
  if (agreement != nullptr) copyOwn(sends, recvs, me, stream);
  for (int i = 0; i < p; ++i) {
    if (i == me) continue;
    uint64_t theirs;
    std::memcpy(&theirs, op.inlineOf(i), sizeof(theirs));
    const bool inLine = (theirs & kBlocksInline) != 0;
    theirs &= ~kBlocksInline;
    largest = std::max(largest, theirs);
    const auto [theirRegion, theirParts] = regionsOf(theirs);
    const uint8_t* entry = op.slot(i, theirParts) + regionIndex(i, me) * theirRegion;
    uint64_t size = theirs;
    if (!inLine && !sizeInFlag) std::memcpy(&size, entry, sizeof(size));
    const Block& r = recvs[static_cast<size_t>(i)];
    if (size != r.bytes) {
      op.mismatch(op.describeRank(i) + " sends " + std::to_string(size) +
                  " bytes to this rank, which expects " + std::to_string(r.bytes));
    }
    if (inLine) {
      copy(r.data, op.inlineOf(i) + sizeof(uint64_t) + regionIndex(i, me) * size, size);
    } else {
      copyOut(r.data, entry + firstDataOffset(r.bytes, sizeInFlag),
              firstBytes(r.bytes, theirRegion, sizeInFlag), stream);
    }
  }

  // The rest of every block larger than the first round's share of a region.
  for (size_t off = sizeInFlag ? region : region - kAlign; off < largest; off += region) {
    mine = op.begin();
    for (int j = 0; j < p; ++j) {
      const Block& s = sends[static_cast<size_t>(j)];
      if (j == me || off >= s.bytes) continue;
      copyIn(op, mine + regionIndex(me, j) * region, s.data + off, std::min(region, s.bytes - off));
    }
    op.publish();
    op.waitAll();
    for (int i = 0; i < p; ++i) {
      const Block& r = recvs[static_cast<size_t>(i)];
      if (i == me || off >= r.bytes) continue;
      copyOut(r.data + off, op.slot(i) + regionIndex(i, me) * region, std::min(region, r.bytes - off),
              stream);
    }
  }
}

}  // namespace meshcomm::host::shm
