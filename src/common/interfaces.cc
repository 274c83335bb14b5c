#include "common/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/fd.h"
#include "meshcomm/error.h"

namespace meshcomm {
namespace {

std::string numericAddress(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

}  // namespace

std::vector<InterfaceAddress> interfaceAddresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    throw Error(std::string("cannot list this host's network interfaces: ") +
                std::strerror(errno));
  }
  std::vector<InterfaceAddress> v4, v6;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || (a->ifa_flags & IFF_UP) == 0) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    (family == AF_INET ? v4 : v6).push_back({a->ifa_name, numericAddress(a->ifa_addr)});
  }
  freeifaddrs(list);
  v4.insert(v4.end(), v6.begin(), v6.end());
  return v4;
}

std::string describeInterfaces(const std::vector<InterfaceAddress>& list) {
  if (list.empty()) return "none";
  std::string out;
  for (const auto& i : list) out += (out.empty() ? "" : ", ") + i.name + " " + i.address;
  return out;
}

std::string addressOfInterface(const std::string& ifname) {
  const auto all = interfaceAddresses();
  for (const auto& i : all) {
    if (i.name == ifname && i.address.find(':') == std::string::npos) return i.address;
  }
  throw InvalidArgument("MESHCOMM_SOCKET_IFNAME=" + ifname +
                        ": no such interface with an IPv4 address (this host has: " +
                        describeInterfaces(all) + ")");
}

InterfaceAddress interfaceTowards(const std::string& peer) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* resolved = nullptr;
  if (int rc = getaddrinfo(peer.c_str(), "9", &hints, &resolved); rc != 0) {
    throw InvalidArgument("cannot resolve the store's host '" + peer +
                          "' (MASTER_ADDR, or the host of a tcp:// init_method): " +
                          gai_strerror(rc));
  }
  // A connected UDP socket sends nothing, but makes the kernel choose the
  // route, whose source address is the one peers reach this rank at.
  std::string failures;
  std::string found;
  for (addrinfo* a = resolved; a != nullptr && found.empty(); a = a->ai_next) {
    Fd fd(::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (fd && ::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
      found = numericAddress(reinterpret_cast<sockaddr*>(&ss));
      continue;
    }
    const int err = errno;
    if (!failures.empty()) failures += "; ";
    failures += numericAddress(a->ai_addr) + ": " + std::strerror(err);
  }
  freeaddrinfo(resolved);
  const auto all = interfaceAddresses();
  if (found.empty()) {
    throw Error("no network interface of this host has a route to " + peer + " (" + failures +
                "); tried " + describeInterfaces(all) +
                ". Check MASTER_ADDR (or the host of a tcp:// init_method), or choose the "
                "interface with MESHCOMM_SOCKET_IFNAME or the address with MESHCOMM_HOST");
  }
  for (const auto& i : all) {
    if (i.address == found) return i;
  }
  return {"?", found};
}

}  // namespace meshcomm
