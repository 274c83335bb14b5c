// Rooted and all-to-all calls over messages (TCP, or across hosts) whose
// data travels with the agreement step's records instead of after them:
// a rank sends what it can send before the verdict in the same write as
// its record, the receivers take it in only once every record agrees, and
// if the records disagree every rank first takes in (drains) what was sent
// to it, so nothing is written, nothing is left behind, and every rank
// throws the same ArgumentsDisagree as agree() with the group usable.
// Whether a rank sent early is read from its record, so that ranks need
// not agree on it. The entry points are agreement.h's agreeAndBroadcast,
// agreeAndGather, agreeAndScatter and agreeAndAllToAll.
//
// Thread-safety: run by the group's executor, one call at a time.
#pragma once

#include <cstddef>
#include <span>

#include "collectives/agreement.h"
#include "collectives/blocks.h"
#include "collectives/comm.h"

namespace meshcomm::collectives {

// broadcast: up to kPayloadBytes the data is in the root's record; up to
// kFirstHopBytes the root sends its buffer to the ranks it sends to first
// with its record, and they forward it down the tree after the verdict.
// REQUIRES: comm.route() == Route::kFlat, checks on, more than one rank.
void broadcastOverMessages(Comm& comm, CallArguments args, void* data, size_t bytes, int root);

// gather and scatter by the linear schedule: a block of up to
// kEagerBlockBytes goes to the root (gather) or from it (scatter) with the
// sender's record. REQUIRES: comm.algorithm() == Algorithm::kLinear,
// checks on, more than one rank.
void gatherOverMessages(Comm& comm, const CallArguments& args, const void* input, size_t inputBytes,
                        std::span<const Block> outputs, int root);
void scatterOverMessages(Comm& comm, const CallArguments& args, std::span<const Block> inputs,
                         void* output, size_t outputBytes, int root);

// all_to_all_single: a rank none of whose blocks exceeds kEagerBlockBytes
// sends each peer its block with its record; one with a larger block sends
// them after the verdict. REQUIRES: comm.route() != Route::kOnHost, checks
// on, more than one rank.
void allToAllOverMessages(Comm& comm, const CallArguments& args, std::span<const Block> sends,
                          std::span<const Block> recvs);

}  // namespace meshcomm::collectives
