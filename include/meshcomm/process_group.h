// ProcessGroup: a set of ranks that run collectives and point-to-point
// operations together, and World: the job's ranks, its rendezvous store and
// the registry of its groups.
//
// Each operation is spelled as the Python function of the same name, in
// lowerCamel (allGatherIntoTensor is all_gather_into_tensor), and errors
// name it in the Python spelling.
//
// Every operation is asynchronous: it is queued on the group's executor,
// runs there in issue order, and returns a Work. A synchronous call is
// `group.allReduce(t)->wait()`. Ranks are group ranks unless a name says
// otherwise. Buffers are the caller's and must stay valid until the Work
// completes.
//
// Errors: calls throw InvalidArgument for bad arguments before anything is
// queued. Communication failures end the Work with Timeout, PeerLost,
// Mismatch or Aborted, and leave the group broken: later calls on it fail
// at once with the same error; destroy it and create a new one.
//
// Thread-safety: every method may be called from any thread; operations
// issued from several threads on one group run in the order the calls
// entered the group.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "meshcomm/export.h"
#include "meshcomm/store.h"
#include "meshcomm/types.h"
#include "meshcomm/work.h"

namespace meshcomm {

using WorkPtr = std::shared_ptr<Work>;

// Per-operation options; fields an operation does not use are ignored.
struct OpOptions {
  ReduceOp op = ReduceOp::kSum;
  int root = 0;  // group rank of the source/destination
  int tag = 0;   // point-to-point only
  // 0 means the group's timeout.
  std::chrono::milliseconds timeout{0};
  // Return only once the operation has completed (the Work is already
  // done). Lets a synchronous call run on the calling thread. Exception: on
  // a thread with an interrupt check (meshcomm/interrupt.h), a call that
  // must queue behind earlier operations returns its pending Work at once.
  bool blocking = false;
};

class GroupImpl;

class MESHCOMM_API ProcessGroup {
 public:
  explicit ProcessGroup(std::shared_ptr<GroupImpl> impl);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  const std::string& name() const;
  int rank() const;
  int size() const;
  // World ranks of the members, indexed by group rank.
  const std::vector<int>& worldRanks() const;
  // Throws InvalidArgument when groupRank is out of range.
  int toWorldRank(int groupRank) const;
  // Returns -1 when worldRank is not a member.
  int toGroupRank(int worldRank) const;
  std::chrono::milliseconds timeout() const;

  // ---- collectives (src/collectives/<family>.cc) ----
  // In place: every rank ends with op over all ranks' data.
  WorkPtr allReduce(TensorRef data, const OpOptions& options = {});
  // In place: every rank ends with the root's data.
  WorkPtr broadcast(TensorRef data, const OpOptions& options = {});
  // In place at the root: data becomes op over all ranks' data; the other
  // ranks' buffers are left as they were.
  WorkPtr reduce(TensorRef data, const OpOptions& options = {});
  // outputs[r] receives rank r's input; all the same numel and dtype.
  WorkPtr allGather(const std::vector<TensorRef>& outputs, TensorRef input,
                    const OpOptions& options = {});
  // output = concatenation of every rank's input (output.numel == size * input.numel).
  // Here and in the uneven form, input may be exactly this rank's block of
  // output (in place); any other overlap is an InvalidArgument.
  WorkPtr allGatherIntoTensor(TensorRef output, TensorRef input, const OpOptions& options = {});
  // output = concatenation of inputs of counts[r] elements each.
  WorkPtr allGatherIntoTensorUneven(TensorRef output, TensorRef input,
                                    const std::vector<int64_t>& counts,
                                    const OpOptions& options = {});
  // output = op over ranks of inputs[rank].
  WorkPtr reduceScatter(TensorRef output, const std::vector<TensorRef>& inputs,
                        const OpOptions& options = {});
  // input holds size equal blocks; output = op over ranks of block[rank].
  // Here and in the uneven form, output may be exactly this rank's block of
  // input (in place); any other overlap is an InvalidArgument.
  WorkPtr reduceScatterTensor(TensorRef output, TensorRef input,
                              const OpOptions& options = {});
  // input holds blocks of counts[r] elements; output = op of block[rank].
  WorkPtr reduceScatterTensorUneven(TensorRef output, TensorRef input,
                                    const std::vector<int64_t>& counts,
                                    const OpOptions& options = {});
  // At the root, outputs[r] receives rank r's input (outputs ignored elsewhere).
  WorkPtr gather(const std::vector<TensorRef>& outputs, TensorRef input,
                 const OpOptions& options = {});
  // At the root, output = concatenation of every rank's input.
  WorkPtr gatherIntoTensor(TensorRef output, TensorRef input, const OpOptions& options = {});
  // Rank r receives the root's inputs[r] (inputs ignored elsewhere).
  WorkPtr scatter(TensorRef output, const std::vector<TensorRef>& inputs,
                  const OpOptions& options = {});
  // Rank r receives block r of the root's input.
  WorkPtr scatterTensor(TensorRef output, TensorRef input, const OpOptions& options = {});
  // outputs[r] receives rank r's inputs[rank]; sizes may differ per pair.
  // Here and in allToAllSingle no output may overlap an input
  // (InvalidArgument).
  WorkPtr allToAll(const std::vector<TensorRef>& outputs,
                   const std::vector<TensorRef>& inputs, const OpOptions& options = {});
  // Rank r's input holds sendCounts[j] elements for each rank j in order;
  // the output holds recvCounts[j] elements from each rank j in order.
  // Empty count vectors mean equal blocks.
  WorkPtr allToAllSingle(TensorRef output, TensorRef input,
                         const std::vector<int64_t>& recvCounts,
                         const std::vector<int64_t>& sendCounts,
                         const OpOptions& options = {});
  WorkPtr barrier(const OpOptions& options = {});

  // ---- point to point (src/collectives/p2p.cc) ----
  // A receive matches the send from the same peer with the same tag, in
  // the order both were issued; sizes and dtypes must agree.
  WorkPtr send(TensorRef data, int dst, const OpOptions& options = {});
  WorkPtr recv(TensorRef data, int src, const OpOptions& options = {});
  // Receives the first message with options.tag that any other rank sends
  // (MPI_ANY_SOURCE); the Work's sourceRank() names the sender. Among the
  // receives a message could match, the earliest issued takes it, whether
  // it names its source or not.
  WorkPtr recvAnySource(TensorRef data, const OpOptions& options = {});
  // All sends and receives progress together, so no listing order deadlocks.
  // Errors about a batch of one name it send or recv, as if issued so.
  WorkPtr batchIsendIrecv(const std::vector<P2POp>& ops, const OpOptions& options = {});

  // ---- failures (docs/fault-tolerance.md) ----
  // Aborts the group on this rank; callable from any thread, also while
  // another thread is blocked in an operation on it. That operation (within
  // milliseconds) and every later one end with Aborted, and the members
  // blocked with this rank fail with an error saying it aborted the group.
  // Frees nothing (destroy the group for that); safe to call again.
  void abort();
  // Why the group is broken (PeerLost, Timeout, Mismatch, Aborted, ...),
  // or null while it is healthy. Every operation on a broken group fails
  // at once with this error.
  std::exception_ptr error() const;

  const std::shared_ptr<GroupImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<GroupImpl> impl_;
};

struct InitOptions {
  // "" (use `store`, or the launcher's environment when there is none),
  // "env://" (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), or
  // "tcp://host:port" (rank 0 hosts the store there).
  std::string initMethod;
  std::shared_ptr<Store> store;
  // -1: taken from the environment (RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_*).
  int rank = -1;
  int worldSize = -1;
  // Default deadline of every operation; MESHCOMM_TIMEOUT_MS overrides
  // the default when this is left at 0.
  std::chrono::milliseconds timeout{0};
  // The world group's name, and other names it answers to (findGroup): a
  // front that keeps another API's names sets its own (the Python API does).
  std::string worldGroupName = "world";
  std::vector<std::string> worldGroupAliases;
  // Tells this World's groups apart in flight-recorder records and traces
  // when the process already belongs to a job through an earlier World
  // that is still alive (torch.distributed makes one World per group and
  // passes its group's name). Records of such a World name ranks by the
  // job's numbering; its groups are named "<name>@<label>", by default
  // the label lists the members' job ranks.
  std::string label;
};

// How World::newGroup makes a group.
struct NewGroupOptions {
  // The group is named `<namePrefix>_<n>_<sha1 of "_".join(sorted ranks)>`.
  std::string namePrefix = "group";
  // The group's operation deadline; 0: the World's.
  std::chrono::milliseconds timeout{0};
};

class WorldImpl;

// The job: created collectively by every rank, owner of the world group
// and of every sub-group created through it.
class MESHCOMM_API World {
 public:
  // Joins the job; returns once every rank has joined. Throws
  // InvalidArgument for inconsistent rank/world size, Timeout when some
  // ranks do not arrive (naming them).
  static std::shared_ptr<World> init(const InitOptions& options);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const;
  int size() const;
  // This process's index among the job's processes on its host: the
  // launcher's (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
  // SLURM_LOCALID), else its position among the ranks of this host.
  int localRank() const;
  // How many of the job's processes run on this machine (one kernel: the
  // namespaces or containers that MESHCOMM_HOST_ID makes separate hosts
  // count together, since they share its cores). When they outnumber the
  // cores, waits give up their core instead of busy-polling.
  int machineSize() const;
  // InitOptions::worldGroupName.
  const std::string& worldGroupName() const;
  std::shared_ptr<ProcessGroup> worldGroup() const;

  // Creates the group of the given world ranks (sorted, unique), called by
  // exactly those ranks; returns once all of them have called. The name is
  // groupName(options.namePrefix, ranks). Calling it again with the same
  // ranks and prefix returns the existing group. Throws InvalidArgument
  // when this rank is not in `ranks` or ranks are out of range or
  // duplicated.
  std::shared_ptr<ProcessGroup> newGroup(std::vector<int> ranks, const NewGroupOptions& options = {});
  // The group with this name (the world group answers to its name and its
  // aliases), or null.
  std::shared_ptr<ProcessGroup> findGroup(const std::string& name) const;
  // Destroys one group (waits for its queued operations to finish first).
  void destroyGroup(const std::string& name);
  // Names of the live groups.
  std::vector<std::string> groupNames() const;

  // Aborts every group of this rank, the world group included
  // (ProcessGroup::abort on each).
  void abort();
  // Replaces `group` with a new group of its surviving members, renumbered
  // in the order of their world ranks; collective over the survivors, who
  // agree through the store on one member set. Survivors are the members
  // that call it, minus those the store knows are dead or gone, minus
  // `excludeRanks` (world ranks; any caller's list counts), minus those that
  // do not call it within `timeout` (0: the group's timeout). The old group
  // is aborted (a member left out learns it from its next operation on it)
  // and destroyed; shrinking the world group makes the new group the
  // world group (worldGroup(), findGroup of the world's names). Throws
  // InvalidArgument for bad ranks, Aborted on a rank left out, and what
  // creating a group throws when a survivor fails while the new group is
  // set up (shrink the same group again then).
  std::shared_ptr<ProcessGroup> shrinkGroup(const std::shared_ptr<ProcessGroup>& group,
                                            std::vector<int> excludeRanks = {},
                                            std::chrono::milliseconds timeout =
                                                std::chrono::milliseconds(0));

  // `<prefix>_<n>_<sha1 of "_".join(sorted ranks)>`.
  static std::string groupName(const std::string& prefix, std::vector<int> ranks);

 private:
  explicit World(std::unique_ptr<WorldImpl> impl);
  bool namesWorldGroup(const std::string& name) const;
  std::unique_ptr<WorldImpl> impl_;
};

}  // namespace meshcomm
