#include "transport/tcp/tcp_link.h"

#include "transport/tcp/tcp_transport.h"

#include <algorithm>
#include <cstdint>

#include "common/env.h"

namespace meshcomm {

Link setUpTcpLink(const LinkSetup& setup) {
  TcpTransportOptions t;
  t.groupName = setup.groupName;
  t.rank = setup.groupRank;
  t.worldRanks = setup.worldRanks;
  t.advertiseHost = setup.advertiseHost;
  t.groupStore = setup.groupStore;
  t.monitor = setup.monitor;
  t.authToken = setup.authToken;
  t.spin = setup.spin;
  t.matcher = setup.matcher;
  // More ranks than cores: a rank that sleeps in poll(2) must be woken,
  // often from the other core, while one that yields is there to run as
  // soon as the rank that had its core waits in turn (docs/tuning.md).
  const int64_t yieldUs = envIntOr("MESHCOMM_TCP_YIELD_US", setup.oversubscribed ? 200 : 0);
  t.yield = std::chrono::microseconds(std::max<int64_t>(0, yieldUs));
  // A send buffer the kernel does not grow: with its autotuning (up to
  // tcp_wmem's 4 MiB) a rank copies a whole message into the socket before
  // its peer reads any of it, and the buffers' pages have left the caches
  // by the time they are read; capped, sender and receiver take turns on a
  // footprint that stays in cache. 2 ranks, 1 MiB all_reduce: 0.80x the
  // time over loopback, 0.73x between two network namespaces (docs/tuning.md).
  const int64_t sendBuffer = envIntOr("MESHCOMM_TCP_SNDBUF", 256 << 10);
  t.sendBufferBytes = static_cast<int>(std::clamp<int64_t>(sendBuffer, 0, INT32_MAX / 2));
  t.describeSignature = setup.describeSignature;
  Link link;
  link.transport = std::make_unique<TcpTransport>(std::move(t));
  link.reaches.assign(setup.worldRanks.size(), true);
  link.reaches[static_cast<size_t>(setup.groupRank)] = false;
  return link;
}

}  // namespace meshcomm
