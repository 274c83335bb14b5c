// This host's network interfaces, and which of them a rank advertises to
// its peers: the one named by MESHCOMM_SOCKET_IFNAME, else the one whose
// route reaches the store's host (MASTER_ADDR).
#pragma once

#include <string>
#include <vector>

namespace meshcomm {

struct InterfaceAddress {
  std::string name;     // "eth0"
  std::string address;  // "10.0.0.2" or "fe80::1"
};

// Every address of every interface that is up, IPv4 first, in the order
// the kernel lists them.
std::vector<InterfaceAddress> interfaceAddresses();

// "eth0 10.0.0.2, lo 127.0.0.1": for messages.
std::string describeInterfaces(const std::vector<InterfaceAddress>& list);

// The IPv4 address of the named interface. Throws InvalidArgument naming
// the interfaces there are when it has none.
std::string addressOfInterface(const std::string& ifname);

// The address of the interface the kernel routes through to reach `peer`
// (a host name or address). Throws InvalidArgument when `peer` does not
// resolve, Error naming every interface of this host when none has a
// route to it.
InterfaceAddress interfaceTowards(const std::string& peer);

}  // namespace meshcomm
