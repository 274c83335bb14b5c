// gather and scatter among the ranks of one host, on the shared-memory
// segment.
#include <algorithm>
#include <cstring>
#include <string>

#include "host/shm/variants.h"
#include "host/shm/rounds.h"
#include "collectives/tuning.h"
#include "common/check.h"

namespace meshcomm::host::shm {

// gather and scatter accept blocks of different sizes (reduce's
// reduce-scatter + gather uses them so): in the first round every rank
// publishes its own size inline, the root checks them against its blocks,
// and all ranks take the round count from the largest.
namespace {

size_t publishedSize(ShmOp& op, int local) {
  uint64_t v;
  std::memcpy(&v, op.inlineOf(local), sizeof(v));
  return static_cast<size_t>(v);
}

// Round 0's size exchange, with the agreement's records if they ride the
// call; returns the largest size.
size_t exchangeSizes(ShmOp& op, size_t mine, const std::span<const Block>* rootBlocks,
                     const char* what, const HostCollectives::Agreement* agreement) {
  const auto v = static_cast<uint64_t>(mine);
  std::memcpy(op.inlineData(), &v, sizeof(v));
  publishWithRecords(op, agreement);
  op.waitAll();
  size_t largest = 0;
  for (int i = 0; i < op.size(); ++i) {
    size_t theirs = publishedSize(op, i);
    largest = std::max(largest, theirs);
    if (rootBlocks != nullptr && (*rootBlocks)[static_cast<size_t>(i)].bytes != theirs) {
      op.mismatch(op.describeRank(i) + " has " + std::to_string(theirs) + " bytes to " + what +
                  " but the root's block for it holds " +
                  std::to_string((*rootBlocks)[static_cast<size_t>(i)].bytes));
    }
  }
  return largest;
}

}  // namespace

// With the agreement's records, the root copies its own block only once
// they agree: ranks that disagree leave every output as it was.
void gather(ShmOp& op, const void* input, size_t inputBytes, std::span<const Block> outputs,
            int root, const HostCollectives::Agreement* agreement) {
  const auto* in = static_cast<const uint8_t*>(input);
  const bool isRoot = op.rank() == root;
  const size_t piece = op.chunkBytes();
  const bool stream = isRoot && streamOutput(totalBytes(outputs));
  auto copyOwn = [&] {
    if (isRoot) copyOut(outputs[static_cast<size_t>(root)].data, in, inputBytes, stream);
  };
  if (agreement == nullptr) copyOwn();
  size_t rounds = 1;
  for (size_t k = 0; k < rounds; ++k) {
    const size_t off = k * piece;
    const size_t n = off < inputBytes ? std::min(piece, inputBytes - off) : 0;
    // The root's own block goes straight to its output: its slot stays
    // unwritten.
    if (isRoot) {
      op.beginReading();
    } else {
      copyIn(op, op.begin(), in + off, n);
    }
    if (k == 0) {
      rounds = roundsFor(
          exchangeSizes(op, inputBytes, isRoot ? &outputs : nullptr, "gather", agreement), piece);
    } else {
      op.publish();
      if (isRoot) op.waitAll();
    }
    if (!isRoot) continue;
    for (int i = 0; i < op.size(); ++i) {
      const Block& b = outputs[static_cast<size_t>(i)];
      if (i != root && off < b.bytes) {
        copyOut(b.data + off, op.slot(i), std::min(piece, b.bytes - off), stream);
      }
    }
  }
  // With records: once they agree, so after the peers' blocks too.
  if (agreement != nullptr) copyOwn();
}

void scatter(ShmOp& op, std::span<const Block> inputs, void* output, size_t outputBytes,
             int root, const HostCollectives::Agreement* agreement) {
  auto* out = static_cast<uint8_t*>(output);
  const int p = op.size();
  const bool isRoot = op.rank() == root;
  const auto ranks = static_cast<size_t>(p);
  const bool stream = streamOutput(outputBytes);
  auto copyOwn = [&] {
    if (isRoot) copyOut(out, inputs[static_cast<size_t>(root)].data, outputBytes, stream);
  };
  if (agreement == nullptr) copyOwn();
  // Round 0 only agrees on sizes (and on the call, with the records): the
  // root learns them before it copies.
  op.beginReading();
  const size_t largest =
      exchangeSizes(op, outputBytes, isRoot ? &inputs : nullptr, "receive", agreement);
  if (agreement != nullptr) copyOwn();
  // The root's rounds need nobody's data: where the host's ranks have
  // cores of their own, in the rounds of a broadcast (one region per rank)
  // and as many parts as they allow, so it runs ahead of the readers (2
  // ranks: 256 KiB 0.83x, 1 MiB 0.84x the time of rounds of a chunk in two
  // parts). The sizes agree, so every rank splits alike. With more ranks
  // than cores, rounds of a chunk in two parts, as before (4 ranks, 1 MiB:
  // 1.05x with more parts).
  const size_t region =
      std::max(kAlign, alignDown(std::min(aheadRoundBytes(op, largest), op.chunkBytes() / ranks)));
  const size_t parts = roundsAreCheap(op) ? partsFor(op, region * ranks) : 2;
  MESHCOMM_CHECK(region * ranks <= op.slotPartBytes(parts),
                 "shared-memory slot too small for " << p << " ranks");
  const size_t rounds = roundsFor(largest, region);
  for (size_t k = 0; k < rounds; ++k) {
    const size_t off = k * region;
    if (isRoot) {
      uint8_t* mine = op.begin(parts);
      for (int j = 0; j < p; ++j) {
        const Block& b = inputs[static_cast<size_t>(j)];
        if (j != root && off < b.bytes) {
          copyIn(op, mine + static_cast<size_t>(j) * region, b.data + off, std::min(region, b.bytes - off));
        }
      }
      op.publish();
      continue;
    }
    op.beginReading(parts);
    op.publish();
    op.wait(root);
    if (off < outputBytes) {
      copyOut(out + off, op.slot(root) + static_cast<size_t>(op.rank()) * region,
              std::min(region, outputBytes - off), stream);
    }
  }
}

}  // namespace meshcomm::host::shm
