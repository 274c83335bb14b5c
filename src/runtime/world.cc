// World: joining the job (rendezvous through the store), liveness
// registration, and the registry of the job's groups.
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "collectives/operations.h"
#include "common/crypto.h"
#include "common/env.h"
#include "common/interfaces.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "common/socket.h"
#include "meshcomm/error.h"
#include "meshcomm/process_group.h"
#include "runtime/abort_notices.h"
#include "runtime/arrival.h"
#include "runtime/flight_recorder.h"
#include "runtime/group.h"
#include "runtime/launch_env.h"
#include "runtime/shared_settings.h"
#include "runtime/survivors.h"
#include "runtime/torch_agent_store.h"
#include "transport/group_transport.h"
#include "transport/machine.h"
#include "transport/peer_monitor.h"
#include "transport/placement.h"

namespace meshcomm {
namespace {

constexpr char kKeyRoot[] = "__meshcomm";
// How often joining a group checks the store for members that died.
constexpr std::chrono::milliseconds kJoinCheckEvery{200};

std::string advertiseHostFor(const std::string& storeHost) {
  if (auto host = envString("MESHCOMM_HOST"); host && !host->empty()) return *host;
  if (auto ifname = envString("MESHCOMM_SOCKET_IFNAME"); ifname && !ifname->empty()) {
    return addressOfInterface(*ifname);
  }
  if (!storeHost.empty()) {
    InterfaceAddress chosen = interfaceTowards(storeHost);
    MESHCOMM_LOG(kInfo, "advertising " << chosen.address << " (" << chosen.name
                                       << "), the interface whose route reaches " << storeHost);
    return chosen.address;
  }
  // No peer address to route towards (the store listens on every
  // interface of this host): use the hostname's first non-loopback address.
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  std::string found = "127.0.0.1";
  if (getaddrinfo(hostName().c_str(), nullptr, &hints, &list) == 0) {
    for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
      char buf[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf, sizeof(buf));
      if (std::string(buf).rfind("127.", 0) != 0) {
        found = buf;
        break;
      }
    }
    freeaddrinfo(list);
  }
  return found;
}

struct ParsedUrl {
  std::string host;
  uint16_t port = 0;
};

ParsedUrl parseTcpUrl(const std::string& url) {
  std::string rest = url.substr(6);  // after "tcp://"
  size_t q = rest.find('?');
  if (q != std::string::npos) rest = rest.substr(0, q);
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon + 1 >= rest.size()) {
    throw InvalidArgument("init_method '" + url + "' must look like tcp://host:port");
  }
  ParsedUrl p;
  p.host = rest.substr(0, colon);
  if (p.host.size() >= 2 && p.host.front() == '[') p.host = p.host.substr(1, p.host.size() - 2);
  int port = -1;
  try {
    port = std::stoi(rest.substr(colon + 1));
  } catch (...) {
  }
  if (port <= 0 || port > 65535) throw InvalidArgument("init_method '" + url + "' has a bad port");
  p.port = static_cast<uint16_t>(port);
  return p;
}

}  // namespace

// The job as this rank joined it. Everything but the group registry is set
// while joining and read-only until shutdown(); the registry (groups,
// incarnations) may be used from any thread, under mu.
class WorldImpl {
 public:
  int rank = 0;
  int size = 1;
  int localRank = 0;  // index among the ranks of this host
  std::string worldGroupName;                  // InitOptions::worldGroupName
  std::vector<std::string> worldGroupAliases;  // InitOptions::worldGroupAliases
  std::chrono::milliseconds timeout{0};
  std::string authToken;
  std::string advertiseHost;
  std::chrono::microseconds spin{50};
  bool hostsStore = false;
  std::vector<std::string> hostIdOfRank;  // by world rank (transport/placement.h)
  int machineSize = 1;                    // ranks on this machine (transport/machine.h)
  bool oversubscribed = false;            // more ranks on this machine than usable CPUs
  // Flight recorder: whether this World names the process in dumps, each
  // rank's rank in the process's job, and what tells this World's groups
  // apart from the job's own (InitOptions::label; "" in the job's World).
  bool namesProcess = false;
  std::vector<int> jobRankOfRank;
  std::string traceLabel;

  std::shared_ptr<Store> userStore;      // what the job rendezvoused through
  std::shared_ptr<TCPStore> liveStore;   // this runtime's own connection, if TCP
  std::shared_ptr<Store> jobStore;       // keys of this incarnation of the job
  std::string jobPrefix;
  // Learns of the aborts of this rank's groups while it is idle; null when
  // the store is not a TCPStore (no connection of its own can be opened).
  std::unique_ptr<AbortNoticeWatcher> abortNotices;

  mutable Mutex mu;
  std::map<std::string, std::shared_ptr<ProcessGroup>> groups GUARDED_BY(mu);
  std::map<std::string, int> incarnations GUARDED_BY(mu);
  // Store prefix of each live group, and how often it was shrunk here.
  std::map<std::string, std::string> groupKeys GUARDED_BY(mu);
  std::map<std::string, int> shrinkAttempts GUARDED_BY(mu);
  // Replaced when the world group is shrunk (then under mu).
  std::shared_ptr<ProcessGroup> world;

  std::shared_ptr<ProcessGroup> createGroup(const std::string& name, std::vector<int> members,
                                            std::chrono::milliseconds groupTimeout) EXCLUDES(mu);
  void shutdown() EXCLUDES(mu);
  // Also when joining failed part way.
  ~WorldImpl() {
    if (namesProcess) FlightRecorder::releaseJob();
  }
};

std::shared_ptr<ProcessGroup> WorldImpl::createGroup(const std::string& name,
                                                     std::vector<int> members,
                                                     std::chrono::milliseconds groupTimeout) {
  int incarnation;
  {
    MutexLock lock(mu);
    incarnation = incarnations[name]++;
  }
  const int groupRank =
      static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  const std::string groupKey = "group/" + name + "/" + std::to_string(incarnation);
  auto groupStore = std::make_shared<PrefixStore>(groupKey, jobStore);
  auto monitor = std::make_shared<PeerMonitor>(jobStore, name, groupKey + "/abort", members);

  // Every member joins before anything is set up, so a missing one is
  // named as such rather than as a failed connection later.
  const auto n = static_cast<int64_t>(members.size());
  groupStore->set("member/" + std::to_string(groupRank), std::string("1"));
  if (groupStore->add("joined", 1) == n) groupStore->set("ready", std::string("1"));
  try {
    // In slices, so that a member that dies meanwhile (a failure racing
    // with a shrink) fails the creation now, naming it, not at the deadline.
    const Deadline joinBy = Deadline::after(groupTimeout);
    for (;;) {
      try {
        groupStore->wait({"ready"}, std::max(std::chrono::milliseconds(1),
                                             std::min(joinBy.remaining(), kJoinCheckEvery)));
        break;
      } catch (const Timeout&) {
        if (joinBy.expired()) throw;
        monitor->check("creating group " + name);
      }
    }
  } catch (const Timeout&) {
    std::string missing;
    for (size_t i = 0; i < members.size(); ++i) {
      if (!groupStore->check({"member/" + std::to_string(i)})) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(members[i]);
      }
    }
    throw Timeout("creating group " + name + ": world rank(s) " + missing +
                  " did not join within " + std::to_string(groupTimeout.count()) +
                  " ms; every member must call new_group with the same ranks");
  }

  LinkSetup setup;
  setup.groupName = name;
  setup.groupRank = groupRank;
  setup.worldRanks = members;
  std::vector<std::string> hostIds;
  for (int m : members) hostIds.push_back(hostIdOfRank[static_cast<size_t>(m)]);
  setup.placement = Placement::fromHostIds(hostIds);
  setup.groupStore = groupStore;
  setup.monitor = monitor;
  setup.timeout = groupTimeout;
  setup.advertiseHost = advertiseHost;
  setup.authToken = authToken;
  setup.spin = spin;
  setup.maxUnexpectedBytes = static_cast<size_t>(envIntOr(
      "MESHCOMM_MAX_UNEXPECTED_BYTES", static_cast<int64_t>(kDefaultMaxUnexpectedBytes)));
  setup.oversubscribed = oversubscribed;
  setup.describeSignature = describeSignature;
  GroupTransport links = createGroupTransport(setup);
  MESHCOMM_LOG(kInfo, "group " << name << ": rank " << groupRank << " of " << members.size()
                               << " on " << links.placement.hostCount()
                               << " host(s), route: " << routeName(links.route)
                               << (links.hostDomain
                                       ? std::string(" (this host: ") + links.hostDomain->kind() +
                                             " domain of " +
                                             std::to_string(links.hostDomain->localSize()) +
                                             " ranks)"
                                       : std::string()));

  GroupConfig config{name, groupRank, members, groupTimeout, name, members};
  if (!traceLabel.empty()) {
    config.traceName = name + "@" + traceLabel;
    for (int& m : config.traceRanks) m = jobRankOfRank[static_cast<size_t>(m)];
  }
  auto impl = std::make_shared<GroupImpl>(std::move(config), std::move(links));
  if (abortNotices) abortNotices->watch(monitor->abortKey(), impl->abortNotice());
  // A member that aborted the group before the watch began (while this
  // rank was still setting it up) posted its notice before then.
  if (auto aborted = monitor->abortError()) impl->abortNotice()->set(aborted);
  auto group = std::make_shared<ProcessGroup>(std::move(impl));
  MutexLock lock(mu);
  groups[name] = group;
  groupKeys[name] = groupKey;
  return group;
}

void WorldImpl::shutdown() {
  abortNotices.reset();
  // Said before any connection closes, so a peer that finds one closed
  // reports this rank as having left rather than lost.
  try {
    std::string mark = std::to_string(rank) + ",";
    jobStore->append(PeerMonitor::departedRanksKey(), Bytes(mark.begin(), mark.end()));
  } catch (const std::exception& e) {
    MESHCOMM_LOG(kInfo, "shutdown: " << e.what());
  }
  std::map<std::string, std::shared_ptr<ProcessGroup>> doomed;
  {
    MutexLock lock(mu);
    doomed.swap(groups);
  }
  doomed.clear();
  {
    MutexLock lock(mu);
    doomed.emplace("", std::move(world));
  }
  doomed.clear();
  try {
    if (liveStore) liveStore->clearOnDisconnect();
    jobStore->add("exited", 1);
    if (hostsStore) {
      // The store lives in this process: keep it up until every other rank
      // has left, or peers still finishing would see it vanish and fail.
      auto waitMs = envIntOr("MESHCOMM_SHUTDOWN_WAIT_MS", 60000);
      Deadline until = Deadline::after(std::chrono::milliseconds(waitMs));
      while (!until.expired()) {
        int64_t exited = jobStore->add("exited", 0);
        int64_t lost = 0;
        if (jobStore->check({PeerMonitor::lostRanksKey()})) {
          Bytes v = jobStore->get(PeerMonitor::lostRanksKey());
          lost = std::count(v.begin(), v.end(), ',');
        }
        if (exited + lost >= size) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  } catch (const std::exception& e) {
    MESHCOMM_LOG(kInfo, "shutdown: " << e.what());
  }
}

World::World(std::unique_ptr<WorldImpl> impl) : impl_(std::move(impl)) {}

World::~World() { impl_->shutdown(); }

std::string World::groupName(const std::string& prefix, std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string joined;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) joined += "_";
    joined += std::to_string(ranks[i]);
  }
  return prefix + "_" + std::to_string(ranks.size()) + "_" + sha1Hex(joined);
}

std::shared_ptr<World> World::init(const InitOptions& options) {
  auto w = std::make_unique<WorldImpl>();
  if (options.worldGroupName.empty()) throw InvalidArgument("the world group's name is empty");
  w->worldGroupName = options.worldGroupName;
  w->worldGroupAliases = options.worldGroupAliases;
  int rank = options.rank;
  int size = options.worldSize;
  std::string sizeSource = "the arguments";
  std::optional<LaunchEnv> env;
  if (rank >= 0 && size >= 0) {
    // Only the local rank is wanted from a launcher here, and ranks given
    // as arguments must not fail on a launcher's malformed variables.
    try {
      env = launchEnvFromEnvironment();
    } catch (const InvalidArgument&) {
    }
  } else {
    env = launchEnvFromEnvironment();
    if (!env) {
      throw InvalidArgument(
          "rank and world size are unknown: pass them, or launch with meshrun, torchrun, "
          "mpirun or srun (which set RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, or SLURM_*)");
    }
    if (rank < 0) rank = env->rank;
    if (size < 0) size = env->worldSize;
    sizeSource = env->source;
  }
  if (size <= 0) throw InvalidArgument("world size must be positive, got " + std::to_string(size));
  if (rank < 0 || rank >= size) {
    throw InvalidArgument("rank " + std::to_string(rank) + " is outside the world of " +
                          std::to_string(size) + " ranks (from " + sizeSource + ")");
  }
  w->rank = rank;
  w->size = size;
  w->timeout = options.timeout.count() > 0
                   ? options.timeout
                   : std::chrono::milliseconds(envIntOr("MESHCOMM_TIMEOUT_MS", 300000));
  w->authToken = envString("MESHCOMM_AUTH_TOKEN").value_or("");

  // The rendezvous store.
  std::string storeHost;
  std::string advertiseTowards;  // where peers reach us from, if known
  uint16_t storePort = 0;
  if (options.store) {
    if (!options.initMethod.empty()) {
      throw InvalidArgument("pass either a store or an init method, not both");
    }
    w->userStore = options.store;
    if (auto* tcp = dynamic_cast<TCPStore*>(options.store.get())) {
      bool wildcard = tcp->isServer() && (tcp->host().empty() || tcp->host() == "0.0.0.0");
      storeHost = wildcard ? "127.0.0.1" : tcp->host();
      advertiseTowards = wildcard ? "" : storeHost;
      storePort = tcp->port();
    }
  } else {
    std::string method = options.initMethod.empty() ? "env://" : options.initMethod;
    if (method.rfind("tcp://", 0) == 0) {
      ParsedUrl url = parseTcpUrl(method);
      storeHost = url.host;
      storePort = url.port;
    } else if (method == "env://") {
      auto addr = envString("MASTER_ADDR");
      if (!addr || addr->empty()) {
        auto nodes = envString("SLURM_JOB_NODELIST");
        if (nodes && !nodes->empty()) addr = firstSlurmHost(*nodes);
      }
      // meshrun also names its store's port apart: under meshrun, torch's
      // env:// rendezvous moves MASTER_PORT to the next port (the torch
      // backend does so at `import torch` when meshcomm's wheel is
      // installed), while meshcomm's store stays where meshrun serves it.
      const char* portVariable = "MESHCOMM_STORE_PORT";
      std::optional<int64_t> port = envInt(portVariable);
      if (!port) {
        portVariable = "MASTER_PORT";
        port = envInt(portVariable);
      }
      if (!port && envString("SLURM_JOB_NODELIST")) port = slurmDerivedPort();
      if (!addr || addr->empty() || !port) {
        throw InvalidArgument(
            "env:// needs MASTER_ADDR and MASTER_PORT (the address and port where rank 0 "
            "hosts the store); meshrun and torchrun set them");
      }
      if (*port <= 0 || *port > 65535) {
        throw InvalidArgument(std::string(portVariable) + "=" + std::to_string(*port) +
                              " is not a valid port");
      }
      storeHost = *addr;
      storePort = static_cast<uint16_t>(*port);
    } else {
      throw InvalidArgument("init_method '" + method +
                            "' is not supported; use env:// or tcp://host:port");
    }
    // Before any connection: an unreachable MASTER_ADDR fails here at once,
    // naming this host's interfaces, rather than as a store timeout.
    w->advertiseHost = advertiseHostFor(storeHost);
    // Under meshrun the launcher of node 0 hosts the store (env:// only),
    // so it outlives any worker, rank 0 included.
    const bool launcherHostsStore =
        method == "env://" && envString("MESHCOMM_STORE_HOSTED").value_or("") == "launcher";
    const bool hostHere = rank == 0 && !launcherHostsStore;
    // Under torchrun with an agent store, MASTER_PORT is torch's store:
    // rank 0 hosts meshcomm's on a free port and publishes it there.
    const bool viaTorchAgent = method == "env://" && !launcherHostsStore && torchAgentHostsStore();
    if (viaTorchAgent && !hostHere) {
      ParsedUrl url = parseTcpUrl(
          "tcp://" + publishedStoreAddress(storeHost, storePort, Deadline::after(w->timeout)));
      storeHost = url.host;
      storePort = url.port;
    }
    TCPStoreOptions so;
    so.host = hostHere ? "0.0.0.0" : storeHost;
    so.port = viaTorchAgent && hostHere ? 0 : storePort;
    so.isServer = hostHere;
    so.worldSize = size;
    so.waitForWorkers = false;
    so.timeout = w->timeout;
    auto store = std::make_shared<TCPStore>(so);
    w->userStore = store;
    w->hostsStore = hostHere;
    if (viaTorchAgent && hostHere) {
      const bool ipv6 = w->advertiseHost.find(':') != std::string::npos;
      publishStoreAddress(storeHost, storePort,
                          (ipv6 ? "[" + w->advertiseHost + "]" : w->advertiseHost) + ":" +
                              std::to_string(store->port()),
                          Deadline::after(w->timeout));
      storePort = store->port();
    }
  }
  std::shared_ptr<Store> runtimeStore = w->userStore;
  if (!storeHost.empty()) {
    // A connection of the runtime's own: it carries the liveness
    // registration and never queues behind the user's store calls. The
    // rank hosting the store reaches it over loopback.
    TCPStoreOptions so;
    so.host = w->hostsStore ? "127.0.0.1" : storeHost;
    so.port = storePort;
    so.timeout = w->timeout;
    w->liveStore = std::make_shared<TCPStore>(so);
    runtimeStore = w->liveStore;
  }
  if (options.store) w->advertiseHost = advertiseHostFor(advertiseTowards);

  // Incarnation: every init on the same store by the same job counts up
  // together, so keys of a previous incarnation never mix with these.
  // A launcher that restarts its workers on a store it keeps numbers the
  // attempts, so an attempt whose ranks did not all join leaves no count
  // behind for the next one.
  std::string keyRoot = kKeyRoot;
  if (auto restart = envString("MESHCOMM_RESTART_COUNT"); restart && !restart->empty()) {
    keyRoot += "/restart" + *restart;
  }
  int64_t joined = runtimeStore->add(keyRoot + "/joined", 1);
  int64_t generation = (joined - 1) / size;
  w->jobPrefix = keyRoot + "/job" + std::to_string(generation);
  w->jobStore = std::make_shared<PrefixStore>(w->jobPrefix, runtimeStore);
  // Names the flight recorder's files and default directory, the same on every rank.
  w->namesProcess = FlightRecorder::claimJob(
      rank, size,
      envString("MESHCOMM_JOB_ID").value_or("port" + std::to_string(storePort)).substr(0, 12) + "-" +
          std::to_string(generation));

  const std::string me = "world_size=" + std::to_string(size) + sharedSettingsField() + " host=" + hostName() +
                         " pid=" + std::to_string(getpid()) +
                         " job_rank=" + std::to_string(FlightRecorder::jobRank()) +
                         " machine=" + localMachineId() + " node=" + localHostId();
  const std::string rankKey = "rank/" + std::to_string(rank);
  Bytes claimed = w->jobStore->compareSet(rankKey, Bytes{}, Bytes(me.begin(), me.end()));
  if (std::string(claimed.begin(), claimed.end()) != me) {
    throw InvalidArgument("rank " + std::to_string(rank) + " is claimed twice: by '" +
                          std::string(claimed.begin(), claimed.end()) + "' and by this process ('" +
                          me + "'); every process needs a distinct rank");
  }
  if (w->liveStore) {
    std::string mark = std::to_string(rank) + ",";
    w->liveStore->appendOnDisconnect(w->jobPrefix + "/" + PeerMonitor::lostRanksKey(),
                                     Bytes(mark.begin(), mark.end()));
  }
  awaitEveryRank(*w->jobStore, rank, size, w->hostsStore,
                 options.store ? "the process serving the job's store" : "rank 0", w->timeout);
  std::vector<std::string> rankKeys;
  for (int r = 0; r < size; ++r) rankKeys.push_back("rank/" + std::to_string(r));
  int localIndex = 0;  // ranks before this one on this host
  const std::string myHostId = localHostId();
  // Hosts that MESHCOMM_HOST_ID makes of one machine's network namespaces
  // share its cores: waits weigh every rank of the machine against them.
  int sameMachine = 0;
  const std::string myMachineId = localMachineId();
  std::vector<std::string> records;
  for (const Bytes& info : w->jobStore->multiGet(rankKeys)) {
    const std::string& s = records.emplace_back(info.begin(), info.end());
    size_t node = s.find(" node=");
    w->hostIdOfRank.push_back(node == std::string::npos ? s : s.substr(node + 6));
    std::string theirs = s.substr(0, s.find(' '));
    if (theirs != "world_size=" + std::to_string(size)) {
      throw InvalidArgument("inconsistent world size: this rank has world_size=" +
                            std::to_string(size) + " but another rank reports '" + s + "'");
    }
    if (w->hostIdOfRank.back() == myHostId &&
        static_cast<int>(w->hostIdOfRank.size()) - 1 < rank) {
      ++localIndex;
    }
    const size_t jobRank = s.find(" job_rank=");
    w->jobRankOfRank.push_back(jobRank == std::string::npos
                                   ? static_cast<int>(w->jobRankOfRank.size())
                                   : std::atoi(s.c_str() + jobRank + 10));
    const size_t machine = s.find(" machine=");
    if (machine != std::string::npos && node != std::string::npos && machine < node &&
        std::string_view(s).substr(machine + 9, node - machine - 9) == myMachineId) {
      ++sameMachine;
    }
  }
  if (std::string why = sharedSettingsDisagreement(records); !why.empty()) {
    refuseJoin(*w->jobStore, rank, size, w->hostsStore, "joining the job: " + why);
  }
  // The launcher knows how it placed its processes; without its word, the
  // rank's position among those of this host.
  w->localRank = env && env->rank == rank && env->localRank >= 0 ? env->localRank : localIndex;
  w->machineSize = sameMachine;
  w->oversubscribed = sameMachine > usableCpus();
  // Busy-polling only pays while every rank has a core to itself.
  int64_t spinUs = envIntOr("MESHCOMM_SPIN_US", w->oversubscribed ? 0 : 50);
  w->spin = std::chrono::microseconds(std::max<int64_t>(0, spinUs));

  if (w->liveStore) {
    // A connection of the watcher's own: it stays blocked in a wait.
    TCPStoreOptions so;
    so.host = w->liveStore->host();
    so.port = w->liveStore->port();
    so.timeout = w->timeout;
    w->abortNotices =
        std::make_unique<AbortNoticeWatcher>(std::make_shared<TCPStore>(so), w->jobPrefix);
  }

  if (!w->namesProcess) {
    w->traceLabel = options.label;
    if (w->traceLabel.empty()) {
      w->traceLabel = "ranks";
      for (int r : w->jobRankOfRank) w->traceLabel += "_" + std::to_string(r);
    }
  }

  std::vector<int> all(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) all[static_cast<size_t>(r)] = r;
  w->world = w->createGroup(w->worldGroupName, all, w->timeout);
  return std::shared_ptr<World>(new World(std::move(w)));
}

int World::rank() const { return impl_->rank; }
int World::size() const { return impl_->size; }
int World::localRank() const { return impl_->localRank; }
int World::machineSize() const { return impl_->machineSize; }
const std::string& World::worldGroupName() const { return impl_->worldGroupName; }

bool World::namesWorldGroup(const std::string& name) const {
  const auto& aliases = impl_->worldGroupAliases;
  return name == impl_->worldGroupName || std::find(aliases.begin(), aliases.end(), name) != aliases.end();
}
std::shared_ptr<ProcessGroup> World::worldGroup() const {
  MutexLock lock(impl_->mu);
  return impl_->world;
}

std::shared_ptr<ProcessGroup> World::newGroup(std::vector<int> ranks, const NewGroupOptions& options) {
  if (options.namePrefix.empty()) throw InvalidArgument("new_group: the name prefix is empty");
  if (ranks.empty()) throw InvalidArgument("new_group: the rank list is empty");
  std::sort(ranks.begin(), ranks.end());
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    throw InvalidArgument("new_group: the rank list has duplicates");
  }
  if (ranks.front() < 0 || ranks.back() >= impl_->size) {
    throw InvalidArgument("new_group: ranks must be in [0, " + std::to_string(impl_->size) + ")");
  }
  if (!std::binary_search(ranks.begin(), ranks.end(), impl_->rank)) {
    throw InvalidArgument("new_group: world rank " + std::to_string(impl_->rank) +
                          " is not in the rank list; only the members create a group");
  }
  std::string name = groupName(options.namePrefix, ranks);
  if (auto existing = findGroup(name)) return existing;
  return impl_->createGroup(name, ranks,
                            options.timeout.count() > 0 ? options.timeout : impl_->timeout);
}

std::shared_ptr<ProcessGroup> World::findGroup(const std::string& name) const {
  const bool world = namesWorldGroup(name);
  MutexLock lock(impl_->mu);
  if (world) return impl_->world;
  auto it = impl_->groups.find(name);
  return it == impl_->groups.end() ? nullptr : it->second;
}

void World::destroyGroup(const std::string& name) {
  if (namesWorldGroup(name)) {
    throw InvalidArgument("the world group ends with the World itself");
  }
  std::shared_ptr<ProcessGroup> doomed;
  {
    MutexLock lock(impl_->mu);
    auto it = impl_->groups.find(name);
    if (it == impl_->groups.end()) {
      throw InvalidArgument("no group named '" + name + "' on this rank");
    }
    doomed = std::move(it->second);
    impl_->groups.erase(it);
    impl_->groupKeys.erase(name);
    impl_->shrinkAttempts.erase(name);
  }
}

void World::abort() {
  std::vector<std::shared_ptr<ProcessGroup>> all;
  {
    MutexLock lock(impl_->mu);
    for (const auto& [name, group] : impl_->groups) all.push_back(group);
    if (impl_->world) all.push_back(impl_->world);
  }
  for (const auto& group : all) group->abort();
}

std::shared_ptr<ProcessGroup> World::shrinkGroup(const std::shared_ptr<ProcessGroup>& group,
                                                 std::vector<int> excludeRanks,
                                                 std::chrono::milliseconds timeout) {
  if (!group) throw InvalidArgument("shrink_group: no group given");
  const std::string oldName = group->name();
  std::string groupKey;
  int attempt = 0;
  {
    MutexLock lock(impl_->mu);
    auto it = impl_->groupKeys.find(oldName);
    if (it == impl_->groupKeys.end() || impl_->groups.count(oldName) == 0) {
      throw InvalidArgument("shrink_group: group " + oldName +
                            " is not a live group of this rank (destroyed or shrunk already)");
    }
    groupKey = it->second;
    attempt = impl_->shrinkAttempts[oldName]++;
  }
  ShrinkAttempt shrink{groupKey + "/shrink/" + std::to_string(attempt), impl_->rank,
                       std::move(excludeRanks), timeout};
  const std::vector<int> survivors = agreeToShrink(*group, impl_->jobStore, shrink);
  auto fresh = impl_->createGroup(shrunkGroupName(oldName, attempt), survivors, group->timeout());

  std::shared_ptr<ProcessGroup> doomed;
  MutexLock lock(impl_->mu);
  auto it = impl_->groups.find(oldName);
  if (it != impl_->groups.end()) {
    doomed = std::move(it->second);
    impl_->groups.erase(it);
  }
  impl_->groupKeys.erase(oldName);
  impl_->shrinkAttempts.erase(oldName);
  if (impl_->world && impl_->world->name() == oldName) impl_->world = fresh;
  lock.unlock();
  return fresh;
}

std::vector<std::string> World::groupNames() const {
  MutexLock lock(impl_->mu);
  std::vector<std::string> names;
  for (const auto& [name, group] : impl_->groups) names.push_back(name);
  return names;
}

}  // namespace meshcomm
