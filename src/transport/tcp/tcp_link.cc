#include "transport/tcp/tcp_link.h"

#include "transport/tcp/tcp_transport.h"

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
  t.describeSignature = setup.describeSignature;
  Link link;
  link.transport = std::make_unique<TcpTransport>(std::move(t));
  link.reaches.assign(setup.worldRanks.size(), true);
  link.reaches[static_cast<size_t>(setup.groupRank)] = false;
  return link;
}

}  // namespace meshcomm
