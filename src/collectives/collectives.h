// The collective algorithms: one entry point per family, each a plain
// function over a Comm. Buffers are caller-owned, sizes in bytes or
// elements as named, and every rank of the group calls the same function
// with consistent arguments (the runtime has validated them locally).
//
// Layout: one folder per family, so that everything one collective can do
// sits together and a change to one family touches one folder:
//
//   <family>/call.h        its public operations as the runtime issues them:
//                          argument rules, signature, algorithm, body
//   <family>/<family>.cc   the entry point declared here, which runs the
//                          call's algorithm: the family's algorithms over
//                          messages, or on one host the host domain's
//                          (host_collectives.h; src/host/ implements them)
//   <family>/hierarchical.cc  the hierarchical variant, where one exists
//                          (all_reduce, broadcast, reduce, barrier)
//   <family>/variants.h    its declaration
//
// Families: all_reduce/, broadcast/, reduce/, all_gather/, reduce_scatter/,
// gather_scatter/ (mirror images, sharing their size check), all_to_all/,
// barrier/. Beside them: tuning.{h,cc}, the one table that picks an
// algorithm (MESHCOMM_ALGO_<OP> included); operations.{h,cc}, the op list;
// host_collectives.h, what an on-host kind runs; hierarchical/leaders.*, which rank leads each host; comm.h,
// blocks.h and scratch.h, what every algorithm runs on (with the group's
// placement, transport/placement.h).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/blocks.h"
#include "collectives/comm.h"
#include "collectives/tuning.h"
#include "meshcomm/types.h"

namespace meshcomm::collectives {

// all_reduce/: data (count elements) becomes op over all ranks, in place.
void allReduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op);

// broadcast/: every rank's data becomes the root's.
void broadcast(Comm& comm, void* data, size_t bytes, int root);
// The broadcast over messages after its root has already sent its whole
// buffer, as one message of `firstHop`'s, to each rank that receives from
// it directly (receivesFromRoot): the root waits for those sends, they
// receive there, and the tree below them runs as broadcast()'s does.
// REQUIRES: comm.route() == Route::kFlat.
void broadcastAfterFirstHop(Comm& comm, Comm& firstHop, void* data, size_t bytes, int root);
// Whether `rank` receives a broadcast of `bytes` from `root` directly, in
// the tree that broadcast() runs for it over messages.
bool receivesFromRoot(const Comm& comm, size_t bytes, int rank, int root);

// reduce/: the root's data becomes op over all ranks; others untouched.
void reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root);

// all_gather/: outputs[r] receives rank r's input (outputs[rank] too).
// REQUIRES: outputs[rank].bytes == inputBytes.
void allGather(Comm& comm, const void* input, size_t inputBytes, std::span<const Block> outputs);

// reduce_scatter/: input holds one block per rank (blockCounts[r]
// elements, in rank order); output (blockCounts[rank] elements) receives op
// over all ranks of their block `rank`. The input is not modified.
void reduceScatter(Comm& comm, const void* input, std::span<const size_t> blockCounts,
                   void* output, DType dtype, ReduceOp op);

// gather_scatter/: gather to / scatter from the root.
// outputs / inputs are only read at the root.
void gather(Comm& comm, const void* input, size_t inputBytes, std::span<const Block> outputs,
            int root);
void scatter(Comm& comm, std::span<const Block> inputs, void* output, size_t outputBytes,
             int root);

// all_to_all/: sends[j] goes to rank j, recvs[j] comes from rank j.
void allToAll(Comm& comm, std::span<const Block> sends, std::span<const Block> recvs);

// barrier/: returns once every rank has entered.
void barrier(Comm& comm);

}  // namespace meshcomm::collectives
