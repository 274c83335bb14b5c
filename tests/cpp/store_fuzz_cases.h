// Requests and damage for fuzzing a TCPStore server through raw sockets
// (store_fuzz_test.cc): random bytes, well-formed requests for every opcode
// the protocol knows, and mutations aimed at the header fields where the
// decoder makes its decisions. Everything comes from one seeded generator,
// so a failing campaign can be replayed.
//
// Thread-safety: a CaseGenerator is used by one thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "meshcomm/store.h"
#include "store/protocol.h"

namespace meshcomm::test {

inline Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

// Generates requests and damage for one server configuration.
class CaseGenerator {
 public:
  CaseGenerator(uint64_t seed, const StoreLimits& limits) : rng_(seed), limits_(limits) {}

  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool chance(int percent) { return below(100) < static_cast<uint64_t>(percent); }

  Bytes randomBytes(size_t n) {
    Bytes out(n);
    for (auto& c : out) c = static_cast<uint8_t>(rng_());
    return out;
  }

  // Mostly a handful of short keys (so requests interact), sometimes keys
  // at and just over the limit.
  Bytes key() {
    switch (below(10)) {
      case 0: return Bytes(limits_.maxKeyBytes, 'K');
      case 1: return Bytes(limits_.maxKeyBytes + 1, 'K');
      case 2: return Bytes{};
      default: return text("fz/" + std::to_string(below(8)));
    }
  }

  Bytes value() {
    switch (below(12)) {
      case 0: return Bytes{};
      case 1: return Bytes(std::min<size_t>(limits_.maxValueBytes, 1 << 16), 'V');
      case 2: return text(std::to_string(static_cast<int64_t>(rng_())));  // a counter
      default: return randomBytes(below(64));
    }
  }

  // Arguments of a well-formed request for op. *waits is set when the
  // server may park it (then it may be dropped unanswered on close).
  std::vector<Bytes> argsFor(store::Op op, bool* waits) {
    *waits = false;
    auto shortTimeout = [&] { return store::encodeU64(below(30)); };
    switch (op) {
      case store::Op::kHello: return {store::encodeU64(below(2)), randomBytes(below(40))};
      case store::Op::kAuth: return {randomBytes(32)};
      case store::Op::kSet:
      case store::Op::kAppend: return {key(), value()};
      case store::Op::kGet: *waits = true; return {shortTimeout(), key()};
      case store::Op::kAdd: return {key(), store::encodeI64(static_cast<int64_t>(rng_()) >> below(64))};
      case store::Op::kDelete: return {key()};
      case store::Op::kCompareSet: return {key(), value(), value()};
      case store::Op::kCheck:
      case store::Op::kWait:
      case store::Op::kMultiGet: {
        std::vector<Bytes> args;
        if (op != store::Op::kCheck) {
          *waits = true;
          args.push_back(shortTimeout());
        }
        size_t n = 1 + below(std::min<size_t>(limits_.maxKeysPerRequest + 1, 6));
        for (size_t i = 0; i < n; ++i) args.push_back(key());
        return args;
      }
      case store::Op::kNumKeys:
      case store::Op::kPing: return {};
      case store::Op::kMultiSet: {
        std::vector<Bytes> args;
        size_t n = 1 + below(4);
        for (size_t i = 0; i < n; ++i) {
          args.push_back(key());
          args.push_back(value());
        }
        return args;
      }
      case store::Op::kAppendOnClose: return {key(), randomBytes(below(16))};
    }
    return {};
  }

  store::Op randomOp() {
    // Every opcode isKnownOp accepts, so new opcodes are fuzzed as well.
    std::vector<uint8_t> known;
    for (int c = 0; c < 256; ++c) {
      if (store::isKnownOp(static_cast<uint8_t>(c))) known.push_back(static_cast<uint8_t>(c));
    }
    return static_cast<store::Op>(known[below(known.size())]);
  }

  // Appends one valid request; returns its start offset.
  size_t appendRequest(Bytes* wire, store::Op op, bool* waits) {
    size_t start = wire->size();
    auto args = argsFor(op, waits);
    std::vector<std::span<const uint8_t>> spans;
    for (const auto& a : args) spans.emplace_back(a.data(), a.size());
    store::encodeFrame(static_cast<uint8_t>(op), spans, wire);
    return start;
  }

  void appendHello(Bytes* wire) {
    Bytes f = store::encodeFrame(static_cast<uint8_t>(store::Op::kHello),
                                 {store::encodeU64(0), text("fuzz")});
    wire->insert(wire->end(), f.begin(), f.end());
  }

  uint32_t interestingU32() {
    const uint32_t v[] = {0,
                          1,
                          4,
                          7,
                          8,
                          9,
                          static_cast<uint32_t>(limits_.maxKeyBytes),
                          static_cast<uint32_t>(limits_.maxKeyBytes + 1),
                          static_cast<uint32_t>(limits_.maxValueBytes),
                          static_cast<uint32_t>(limits_.maxValueBytes + 1),
                          static_cast<uint32_t>(limits_.maxKeysPerRequest + 1),
                          0x7FFFFFFF,
                          0xFFFFFFFF};
    return chance(80) ? v[below(std::size(v))] : static_cast<uint32_t>(rng_());
  }

  // Damages wire in 1-4 places; frameStarts lets some mutations aim at
  // header fields, where the decoder's decisions are made.
  void mutate(Bytes* wire, const std::vector<size_t>& frameStarts) {
    int n = 1 + static_cast<int>(below(4));
    for (int i = 0; i < n && !wire->empty(); ++i) {
      size_t pos = below(wire->size());
      switch (below(9)) {
        case 0: (*wire)[pos] ^= static_cast<uint8_t>(1u << below(8)); break;
        case 1: (*wire)[pos] = static_cast<uint8_t>(rng_()); break;
        case 2: {  // a length-like value anywhere
          uint32_t v = interestingU32();
          for (size_t k = 0; k < 4 && pos + k < wire->size(); ++k) {
            (*wire)[pos + k] = static_cast<uint8_t>(v >> (8 * k));
          }
          break;
        }
        case 3:
        case 4: {  // a header field of one frame
          if (frameStarts.empty()) break;
          size_t f = frameStarts[below(frameStarts.size())];
          if (f + store::kHeaderBytes > wire->size()) break;
          switch (below(5)) {
            case 0: (*wire)[f + 3] = static_cast<uint8_t>(rng_()); break;  // opcode
            case 1: (*wire)[f + 2] = static_cast<uint8_t>(below(3)); break;  // version
            case 2: {  // argc
              uint32_t v = interestingU32();
              for (int k = 0; k < 4; ++k) (*wire)[f + 4 + k] = static_cast<uint8_t>(v >> (8 * k));
              break;
            }
            default: {  // payload length: off by a little or by a lot
              uint64_t old = 0;
              for (int k = 7; k >= 0; --k) old = (old << 8) | (*wire)[f + 8 + k];
              uint64_t v = chance(50) ? old + below(9) - 4 : (uint64_t{1} << below(64));
              for (int k = 0; k < 8; ++k) (*wire)[f + 8 + k] = static_cast<uint8_t>(v >> (8 * k));
              break;
            }
          }
          break;
        }
        case 5: {
          Bytes junk = randomBytes(1 + below(16));
          wire->insert(wire->begin() + static_cast<ptrdiff_t>(pos), junk.begin(), junk.end());
          break;
        }
        case 6: {
          size_t len = std::min<size_t>(1 + below(16), wire->size() - pos);
          wire->erase(wire->begin() + static_cast<ptrdiff_t>(pos),
                      wire->begin() + static_cast<ptrdiff_t>(pos + len));
          break;
        }
        case 7: {
          size_t len = std::min<size_t>(1 + below(32), wire->size() - pos);
          Bytes copy(wire->begin() + static_cast<ptrdiff_t>(pos),
                     wire->begin() + static_cast<ptrdiff_t>(pos + len));
          wire->insert(wire->end(), copy.begin(), copy.end());
          break;
        }
        default: wire->resize(pos); break;  // truncate
      }
    }
  }

 private:
  std::mt19937_64 rng_;
  StoreLimits limits_;
};

}  // namespace meshcomm::test
