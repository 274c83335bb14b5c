// Joining the job: waiting until every rank has registered, so that every
// rank that came names the ranks that did not.
//
// The rank hosting the store gives up at its deadline like the others, but
// its exit takes the store away: the others would then only learn that
// they lost the connection. So it leaves its verdict in the store and keeps
// the store up until the ranks that came have read it (or a short bound
// passes); they look for it between short waits. A store host that is gone
// for another reason is named as such, with what was known of the others.
//
// Thread-safety: called once per World::init, on the calling thread.
#pragma once

#include <chrono>
#include <string>

#include "meshcomm/store.h"

namespace meshcomm {

// Registers this rank's arrival under `jobStore` (whose keys "rank/<r>" the
// ranks set when they arrive) and waits for every rank. Throws Timeout
// naming the missing ranks at `timeout`, or at the store host's verdict;
// StoreError saying the store host is gone when its connection breaks.
// `storeHost` names who serves the store in messages ("rank 0").
void awaitEveryRank(Store& jobStore, int rank, int size, bool hostsStore,
                    const std::string& storeHost, std::chrono::milliseconds timeout);

// Fails the join with InvalidArgument(`why`) once every rank has read every
// record: each rank that finds the records disagree calls this (they all
// do: they judge the same records alike), and the store host waits (for a
// short bound) until the others have said so, so that none of them loses
// the store before it has read what it needs.
[[noreturn]] void refuseJoin(Store& jobStore, int rank, int size, bool hostsStore, const std::string& why);

}  // namespace meshcomm
