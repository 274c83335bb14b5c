// all_gather among the ranks of one host, on the shared-memory segment.
#include <algorithm>

#include "host/shm/variants.h"
#include "host/shm/rounds.h"
#include "collectives/tuning.h"

namespace meshcomm::host::shm {

void allGather(ShmOp& op, const void* input, size_t inputBytes, std::span<const Block> outputs,
               const HostCollectives::Agreement* agreement) {
  const auto* in = static_cast<const uint8_t*>(input);
  const int p = op.size();
  size_t largest = 0;
  for (const Block& b : outputs) largest = std::max(largest, b.bytes);
  const bool useInline = fitsInline(largest);
  const size_t piece = useInline ? ShmDomain::kInlineBytes : op.chunkBytes();
  const size_t rounds = roundsFor(largest, piece);
  const bool stream = streamOutput(totalBytes(outputs));
  auto copyOwn = [&] { copyOut(outputs[static_cast<size_t>(op.rank())].data, in, inputBytes, stream); };
  // This rank's own block: with records, only once they are judged, which
  // publishWithRecords waits for (every output stays as it was until
  // then). Else a small one after publishing too, so that the peers'
  // copies out start meanwhile (2 ranks, 1-16 KiB: 0.87-0.93 of the time),
  // and a large one before, where the two copies at once cost more than
  // the wait (64 KiB-1 MiB: 1.05-1.07).
  constexpr size_t kOwnAfterPublishBelow = size_t{32} << 10;
  const bool ownAfterPublish = agreement != nullptr || inputBytes < kOwnAfterPublishBelow;
  if (!ownAfterPublish) copyOwn();
  // Rounds smaller than the slot rotate through its parts (partsFor).
  const size_t parts = partsFor(op, std::min(piece, largest));
  for (size_t k = 0; k < rounds; ++k) {
    const size_t off = k * piece;
    // Inline rounds leave the slot alone, so they claim none (ShmOp::beginReading).
    uint8_t* mine = useInline ? (op.beginReading(), op.inlineData()) : op.begin(parts);
    if (off < inputBytes) copyIn(op, mine, in + off, std::min(piece, inputBytes - off));
    publishWithRecords(op, k == 0 ? agreement : nullptr);
    if (k == 0 && ownAfterPublish) copyOwn();
    op.waitAll();
    for (int i = 0; i < p; ++i) {
      const Block& b = outputs[static_cast<size_t>(i)];
      if (i == op.rank() || off >= b.bytes) continue;
      copyOut(b.data + off, useInline ? op.inlineOf(i) : op.slot(i), std::min(piece, b.bytes - off),
              stream);
    }
  }
}

}  // namespace meshcomm::host::shm
