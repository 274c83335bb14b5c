// libFuzzer target for the store's FrameDecoder, in both roles.
//
// Input layout: byte 0 seeds how the stream is split into feed() chunks,
// byte 1 picks small limits (so limit checks are reachable with short
// inputs), byte 2 picks how the rest becomes the stream: as is, behind a
// valid magic and version, or as a description of well-formed frames with
// one byte possibly damaged.
//
// Beyond "does not crash" (ASan/UBSan), each run checks properties that
// must hold for any input:
//   - feed() never claims more bytes than it was given, and consumes all of
//     them whenever it needs more;
//   - bufferedBytes() equals the bytes consumed since the last frame;
//   - a decoded frame has a code valid for the role, arguments within the
//     limits, and re-encodes to exactly the bytes it was decoded from;
//   - the sequence of frames and the final outcome do not depend on how the
//     stream was split into chunks.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "store/protocol.h"

namespace {

using meshcomm::Bytes;
using meshcomm::StoreLimits;
using meshcomm::store::FrameDecoder;
using meshcomm::store::Role;

#define FUZZ_REQUIRE(cond) \
  do {                     \
    if (!(cond)) __builtin_trap(); \
  } while (0)

struct Outcome {
  std::vector<meshcomm::store::Frame> frames;
  FrameDecoder::Result last = FrameDecoder::Result::kNeedMore;
  std::string error;
};

bool sameFrame(const meshcomm::store::Frame& a, const meshcomm::store::Frame& b) {
  return a.code == b.code && a.args == b.args;
}

// A tiny deterministic generator for chunk sizes.
struct SplitRng {
  uint32_t state;
  uint32_t next() {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return state;
  }
};

Outcome decodeStream(Role role, const StoreLimits& limits, const uint8_t* data, size_t size,
                     uint32_t splitSeed, bool chunked) {
  FrameDecoder decoder(role, limits);
  SplitRng rng{splitSeed | 1};
  Outcome out;
  size_t off = 0;
  size_t frameStart = 0;
  // Largest argument the decoder may accept in this role.
  const size_t argCap = std::max({limits.maxKeyBytes, limits.maxValueBytes,
                                  meshcomm::store::kMaxOnCloseValueBytes, size_t{64}});
  while (off < size) {
    size_t n = size - off;
    if (chunked) {
      uint32_t r = rng.next();
      size_t pick = (r & 3) == 0 ? 1 : (r & 3) == 1 ? (r >> 8) % 8 + 1 : (r >> 8) % 300 + 1;
      n = std::min(n, pick);
    }
    FrameDecoder::Result result = FrameDecoder::Result::kError;
    size_t used = decoder.feed(data + off, n, &result);
    FUZZ_REQUIRE(used <= n);
    off += used;
    out.last = result;
    if (result == FrameDecoder::Result::kError) {
      FUZZ_REQUIRE(!decoder.error().empty());
      out.error = decoder.error();
      // A failed decoder stays failed.
      FrameDecoder::Result again = FrameDecoder::Result::kFrame;
      FUZZ_REQUIRE(decoder.feed(data, size, &again) == 0);
      FUZZ_REQUIRE(again == FrameDecoder::Result::kError);
      return out;
    }
    FUZZ_REQUIRE(decoder.bufferedBytes() == off - frameStart);
    if (result == FrameDecoder::Result::kNeedMore) {
      FUZZ_REQUIRE(used == n);
      continue;
    }
    meshcomm::store::Frame frame = decoder.take();
    FUZZ_REQUIRE(decoder.bufferedBytes() == 0);
    if (role == Role::kServer) {
      FUZZ_REQUIRE(meshcomm::store::isKnownOp(frame.code));
    } else {
      FUZZ_REQUIRE(meshcomm::store::isKnownStatus(frame.code));
    }
    for (const auto& a : frame.args) FUZZ_REQUIRE(a.size() <= argCap);
    Bytes again = meshcomm::store::encodeFrame(frame.code, frame.args);
    FUZZ_REQUIRE(again.size() == off - frameStart);
    FUZZ_REQUIRE(std::memcmp(again.data(), data + frameStart, again.size()) == 0);
    frameStart = off;
    out.frames.push_back(std::move(frame));
  }
  return out;
}

// Builds a stream of well-formed frames from a compact description
// (code, argument count, then per argument a length byte and its bytes),
// so the fuzzer reaches per-opcode argument checks without first having to
// discover the magic, version and length bookkeeping byte by byte.
Bytes framesFromDescription(const uint8_t* data, size_t size) {
  Bytes out;
  size_t i = 0;
  while (i + 2 <= size) {
    uint8_t code = data[i++];
    size_t argc = data[i++] % 8;
    std::vector<Bytes> args;
    for (size_t a = 0; a < argc && i < size; ++a) {
      size_t want = data[i];
      ++i;
      size_t len = std::min(want, size - i);
      args.emplace_back(data + i, data + i + len);
      i += len;
    }
    Bytes f = meshcomm::store::encodeFrame(code, args);
    out.insert(out.end(), f.begin(), f.end());
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint32_t splitSeed = data[0] * 2654435761u;
  const uint8_t sel = data[1];
  const uint8_t mode = data[2] % 3;
  data += 3;
  size -= 3;

  StoreLimits limits;
  limits.maxKeyBytes = 1 + (sel & 0x0F) * 2;            // 1..31
  limits.maxValueBytes = 8 + ((sel >> 4) & 0x03) * 40;  // 8..128
  limits.maxKeysPerRequest = 1 + ((sel >> 6) & 0x03);   // 1..4
  limits.maxClients = 4;

  Bytes stream;
  switch (mode) {
    case 0:  // the bytes as a peer would send them
      stream.assign(data, data + size);
      break;
    case 1:  // the same, behind a valid magic and version
      stream.assign(data, data + size);
      if (stream.size() >= 3) {
        stream[0] = static_cast<uint8_t>(meshcomm::store::kMagic);
        stream[1] = static_cast<uint8_t>(meshcomm::store::kMagic >> 8);
        stream[2] = meshcomm::store::kVersion;
      }
      break;
    default: {  // well-formed frames, one byte possibly damaged
      if (size < 2) return 0;
      stream = framesFromDescription(data + 2, size - 2);
      uint16_t at = static_cast<uint16_t>(data[0] | (data[1] << 8));
      if (!stream.empty() && (at & 1)) stream[(at >> 1) % stream.size()] ^= 0x5A;
      break;
    }
  }

  for (Role role : {Role::kServer, Role::kClient}) {
    const uint8_t* s = stream.data();
    const size_t n = stream.size();
    Outcome whole = decodeStream(role, limits, s, n, splitSeed, /*chunked=*/false);
    Outcome split = decodeStream(role, limits, s, n, splitSeed, /*chunked=*/true);
    FUZZ_REQUIRE(whole.frames.size() == split.frames.size());
    for (size_t i = 0; i < whole.frames.size(); ++i) {
      FUZZ_REQUIRE(sameFrame(whole.frames[i], split.frames[i]));
    }
    FUZZ_REQUIRE(whole.last == split.last);
    FUZZ_REQUIRE(whole.error == split.error);

    // decodeOne agrees with the streaming decoder on the first frame.
    meshcomm::store::Frame one;
    std::string error;
    FrameDecoder::Result r = meshcomm::store::decodeOne(role, limits, s, n, &one, &error);
    if (r == FrameDecoder::Result::kFrame) {
      FUZZ_REQUIRE(whole.frames.size() == 1 && whole.last == FrameDecoder::Result::kFrame);
      FUZZ_REQUIRE(sameFrame(one, whole.frames[0]));
    } else if (!whole.frames.empty()) {
      // More than one frame, or a frame then junk: decodeOne rejects it.
      FUZZ_REQUIRE(r == FrameDecoder::Result::kError);
    }
  }
  return 0;
}
