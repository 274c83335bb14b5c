// Rendezvous under torchrun when its agent hosts the store.
//
// torchrun's agent already listens on MASTER_PORT with a torch TCPStore and
// tells its processes so (TORCHELASTIC_USE_AGENT_STORE=True). meshcomm's
// rank 0 cannot host its own store on that port, and meshcomm's store
// protocol is not torch's. So rank 0 hosts meshcomm's store on a free port
// and publishes "host:port" in the agent's store, speaking torch's store
// protocol (a few frames of it, no torch import); every rank reads the
// address there. Both dialects torch has used are understood: the current
// one, whose connections start with a validation frame, and the one before
// it (torch 1.x), tried when the server drops a validated connection.
#pragma once

#include <cstdint>
#include <string>

#include "common/deadline.h"

namespace meshcomm {

// True when the launcher says its agent hosts the store on MASTER_PORT.
bool torchAgentHostsStore();

// The agent-store key under which rank 0 publishes meshcomm's store
// address: one per torchrun run and restart, so a restarted job never reads
// the address of the store its previous attempt hosted.
std::string torchAgentStoreKey();

// Rank 0: publishes `address` ("host:port" of meshcomm's store) in the
// agent's store at agentHost:agentPort.
void publishStoreAddress(const std::string& agentHost, uint16_t agentPort,
                         const std::string& address, const Deadline& deadline);

// Every other rank: the address rank 0 published. Throws Timeout saying
// that rank 0 did not publish it in time.
std::string publishedStoreAddress(const std::string& agentHost, uint16_t agentPort,
                                  const Deadline& deadline);

// Sets key = value in the torch store at host:port. Throws StoreError when
// the store cannot be reached or speaks neither dialect, Timeout when the
// deadline passes first.
void torchStoreSet(const std::string& host, uint16_t port, const std::string& key,
                   const std::string& value, const Deadline& deadline);

// Waits for key in the torch store at host:port and returns its value.
// Throws as torchStoreSet does; the Timeout names the key.
std::string torchStoreWaitGet(const std::string& host, uint16_t port, const std::string& key,
                              const Deadline& deadline);

}  // namespace meshcomm
