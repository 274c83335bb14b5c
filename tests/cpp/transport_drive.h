// Driving transports directly, as a collective would: the operation
// context a wait needs, and an exchange of messages of several sizes both
// ways at once between two group ranks, each driven by a thread of its own.
// Any Transport works (TcpTransport, ShmTransport).
//
// Thread-safety: exchangeBothWays drives each transport from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "caught_error.h"
#include "meshcomm/error.h"
#include "meshcomm/store.h"
#include "transport/transport.h"

namespace meshcomm::test {

// The context of one transport wait: names the operation in messages and
// sets its deadline. `group` and `op` must outlive the wait.
inline OpContext opContext(std::string_view group, const char* op, std::chrono::milliseconds timeout) {
  OpContext c;
  c.group = group;
  c.op = op;
  c.deadline = Deadline::after(timeout);
  return c;
}

// Runs first and second on two threads; returns what each threw.
inline std::pair<Caught, Caught> onTwoThreads(const std::function<void()>& first,
                                              const std::function<void()>& second,
                                              std::string* whatFirst, std::string* whatSecond) {
  Caught c0 = Caught::kNone;
  std::thread t([&] { c0 = catchError(first, whatFirst); });
  Caught c1 = catchError(second, whatSecond);
  t.join();
  return {c0, c1};
}

// One side of an exchange: posts a send and a receive of every size (tag =
// the size's index) before waiting for them all, as a ring's full-duplex
// step does, and checks what arrived. Message i of a side filled with
// `fill` holds the byte fill + i. Throws Error naming a damaged message.
inline void exchangeWith(Transport& t, int peer, const std::vector<size_t>& sizes, uint8_t mine,
                         uint8_t theirs, const OpContext& ctx) {
  std::vector<Bytes> out, in;
  std::vector<RequestPtr> reqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.emplace_back(sizes[i], static_cast<uint8_t>(mine + i));
    in.emplace_back(sizes[i], 0);
  }
  const MessageSignature sig{2, 9, 0, 64, 0};
  for (size_t i = 0; i < sizes.size(); ++i) {
    reqs.push_back(t.postSend(peer, i, sig, out[i].data(), out[i].size()));
    reqs.push_back(t.postRecv(peer, i, sig, in[i].data(), in[i].size()));
  }
  t.wait(reqs, ctx);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (in[i] != Bytes(sizes[i], static_cast<uint8_t>(theirs + i))) {
      throw Error("message " + std::to_string(i) + " of " + std::to_string(sizes[i]) + " bytes arrived damaged");
    }
  }
}

// Group ranks 0 and 1 exchange messages of every size both ways at once.
inline std::pair<Caught, Caught> exchangeBothWays(Transport& rank0, Transport& rank1,
                                                  const std::vector<size_t>& sizes, std::string* what0,
                                                  std::string* what1) {
  auto side = [&](Transport& t, int peer, uint8_t mine, uint8_t theirs) {
    return [&t, peer, mine, theirs, &sizes] {
      exchangeWith(t, peer, sizes, mine, theirs, opContext("exchange_test", "exchange", std::chrono::seconds(20)));
    };
  };
  return onTwoThreads(side(rank0, 1, 10, 50), side(rank1, 0, 50, 10), what0, what1);
}

}  // namespace meshcomm::test
