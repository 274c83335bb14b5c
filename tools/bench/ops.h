// The collectives meshcomm-bench measures: how each one sizes its buffers
// and counts bandwidth (nccl-tests conventions), how it is issued on a
// ProcessGroup, and what its outputs must hold afterwards. Which operations
// it measures, under which names, and their sizes and expected outputs
// follow from the operation table (collectives/operations.h: benchName,
// layout, reduces, root), and how each is called from its method's
// argument kinds (runtime/operation_methods.h): no operation is named here.
//
// Size conventions, for a requested size S bytes, element size w, n ranks
// and count = S / w (nccl-tests `getCollByteCount` / `getBw`):
//   op              send elems     recv elems     "count" col   algbw bytes
//   all_reduce      count          count (in place) count        count*w
//   broadcast       count          count (in place) count        count*w
//   reduce          count          count (in place) count        count*w
//   sendrecv        count          count          count          count*w
//   all_gather      count/n        (count/n)*n    count/n        (count/n)*n*w
//   reduce_scatter  (count/n)*n    count/n        count/n        (count/n)*n*w
//   (all_gather_uneven and reduce_scatter_uneven: as the even forms, every block alike)
//   all_to_all      (count/n)*n    (count/n)*n    count/n        (count/n)*n*w
//   gather          count/n        (count/n)*n@root count/n      (count/n)*n*w
//   scatter         (count/n)*n@root count/n      count/n        (count/n)*n*w
// The "size" column is max(send, recv) bytes. busbw = algbw * factor with
// factor 2(n-1)/n for all_reduce; (n-1)/n for all_gather, reduce_scatter,
// all_to_all, gather, scatter; 1 for broadcast, reduce, sendrecv.
//
// Thread-safety: the descriptors are immutable; Slots are used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/operations.h"
#include "data.h"
#include "meshcomm/process_group.h"
#include "meshcomm/types.h"

namespace meshcomm::bench {

// A collective the bench measures: the operation it issues (from the
// operation table, which says whether it takes --op and --root) under its
// nccl-tests name ("all_gather" issues all_gather_into_tensor).
struct CollectiveInfo {
  Operation operation;
  const char* name;  // nccl-tests name; the operation's own name is accepted too
  bool inPlace;      // one buffer serves as input and output
  int minRanks;

  bool reduces() const { return operationInfo(operation).reduces; }  // takes --op
  bool rooted() const { return operationInfo(operation).rooted(); }   // takes --root
};

// Every collective, in the operation table's order (--help lists them so).
const std::vector<CollectiveInfo>& allCollectives();
// The collective called `name`, or issuing the operation called `name`;
// nullptr when there is none.
const CollectiveInfo* findCollective(std::string_view name);

// Element counts of one measurement, derived from the requested size.
struct Shape {
  int64_t sendCount = 0;   // elements in this rank's input (0 where unused)
  int64_t recvCount = 0;   // elements in this rank's output (0 where unused)
  int64_t paramCount = 0;  // the "count" column
  uint64_t printedBytes = 0;  // the "size" column
  double algBytes = 0;     // bytes that algbw divides by the time
  double busFactor = 0;    // busbw / algbw
};

// The shape of `info` for a requested size in bytes. `rank` matters only for
// rooted collectives whose buffers exist at the root alone.
Shape shapeFor(const CollectiveInfo& info, uint64_t bytes, DType dtype, int nranks, int rank,
               int root);

// Page-aligned memory that owns its bytes.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte[], Free> data_;
  size_t size_ = 0;
};

// K input/output buffer pairs of one shape, rotated between iterations so
// that a small message is not served from cache every time.
class Slots {
 public:
  // REQUIRES: count >= 1.
  Slots(const Shape& shape, DType dtype, bool inPlace, int count);
  int count() const { return count_; }
  TensorRef input(int slot) const;
  TensorRef output(int slot) const;
  // Fills every slot's input with this rank's deterministic data (touching
  // every page before anything is timed).
  void fillAll(ValueClass cls, int rank);

 private:
  TensorRef at(const AlignedBuffer& buf, int64_t numel, int slot) const;
  DType dtype_;
  int count_;
  bool inPlace_;
  int64_t sendCount_, recvCount_;
  size_t sendStride_ = 0, recvStride_ = 0;
  AlignedBuffer send_, recv_;
};

// The default number of slots for one shape (input and output together,
// each rounded up to a cache line): enough to cover 64 MiB, at least 4, but
// no more than 256 MiB in total (at least one slot).
int defaultSlotCount(const Shape& shape, DType dtype, bool inPlace);

// Issues one operation of `info` on `group` with slot `slot`'s buffers.
WorkPtr issue(const CollectiveInfo& info, ProcessGroup& group, const Slots& slots, int slot,
              const OpOptions& options);

// Fills slot 0 for a correctness run: inputs get this rank's data, outputs
// are poisoned so an unwritten output fails.
void prepareCheck(const CollectiveInfo& info, Slots& slots, ValueClass cls, int rank, int root);

// Compares slot 0's outputs (after one operation) with what they must hold.
CheckResult verify(const CollectiveInfo& info, const Slots& slots, ValueClass cls,
                   ReduceOp reduceOp, int rank, int nranks, int root);

}  // namespace meshcomm::bench
