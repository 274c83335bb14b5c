// The collective algorithms, one family per file in this folder. Each is a
// plain function over a Comm: buffers are caller-owned, sizes in bytes or
// elements as named, and every rank of the group calls the same function
// with consistent arguments (the runtime has validated them locally).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collectives/comm.h"
#include "collectives/tuning.h"
#include "meshcomm/types.h"

namespace meshcomm {

// A contiguous piece of a buffer.
struct Block {
  uint8_t* data = nullptr;
  size_t bytes = 0;
};

namespace collectives {

// allreduce.cc: data (count elements) becomes op over all ranks, in place.
void allReduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, Algorithm algo);

// broadcast.cc: every rank's data becomes the root's.
void broadcast(Comm& comm, void* data, size_t bytes, int root, Algorithm algo);

// reduce.cc: the root's data becomes op over all ranks; others untouched.
void reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root,
            Algorithm algo);

// allgather.cc: outputs[r] receives rank r's input (outputs[rank] too).
// REQUIRES: outputs[rank].bytes == inputBytes.
void allGather(Comm& comm, const void* input, size_t inputBytes, const std::vector<Block>& outputs);

// reduce_scatter.cc: input holds one block per rank (blockCounts[r]
// elements, in rank order); output (blockCounts[rank] elements) receives op
// over all ranks of their block `rank`. The input is not modified.
void reduceScatter(Comm& comm, const void* input, const std::vector<size_t>& blockCounts,
                   void* output, DType dtype, ReduceOp op);

// gather_scatter.cc: linear gather to / scatter from the root.
// outputs / inputs are only read at the root.
void gather(Comm& comm, const void* input, size_t inputBytes, const std::vector<Block>& outputs,
            int root);
void scatter(Comm& comm, const std::vector<Block>& inputs, void* output, size_t outputBytes,
             int root);

// alltoall.cc: sends[j] goes to rank j, recvs[j] comes from rank j.
void allToAll(Comm& comm, const std::vector<Block>& sends, const std::vector<Block>& recvs);

// barrier.cc: returns once every rank has entered.
void barrier(Comm& comm);

}  // namespace collectives
}  // namespace meshcomm
