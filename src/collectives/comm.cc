#include "collectives/comm.h"

#include "collectives/agreement.h"
#include "common/check.h"
#include "transport/tags.h"

namespace meshcomm {

Comm::Comm(Transport& transport, OpContext context, MessageSignature sig, uint64_t seq,
           Algorithm algorithm, ScratchArena& scratch, Locality locality)
    : Comm(transport, std::move(context), sig, seq, algorithm, scratch, locality, Unannounced{}) {
  if (locality_.domain != nullptr && collectives::checking()) locality_.domain->announce(seq, sig);
}

Comm::Comm(Transport& transport, OpContext context, MessageSignature sig, uint64_t seq,
           Algorithm algorithm, ScratchArena& scratch, Locality locality, Unannounced)
    : transport_(transport),
      context_(std::move(context)),
      sig_(sig),
      seq_(seq),
      algorithm_(algorithm),
      scratch_(scratch),
      locality_(locality) {}

Comm::~Comm() {
  // Keep what a typical call needs; give back what an outsized one took.
  constexpr size_t kKeepBytes = size_t{256} << 20;
  scratch_.trim(kKeepBytes);
}

void Comm::nextPhase() {
  phaseBase_ += kStepsPerPhase;
  MESHCOMM_CHECK(phaseBase_ < tags::kMaxSteps, "too many phases in one collective");
}

RequestPtr Comm::send(int peer, uint32_t step, const void* data, size_t bytes) {
  MESHCOMM_CHECK(step < kStepsPerPhase, "step " << step << " out of range");
  auto r = transport_.postSend(peer, tags::collective(seq_, phaseBase_ + step), sig_, data, bytes);
  posted_.push_back(r);
  return r;
}

RequestPtr Comm::recv(int peer, uint32_t step, void* data, size_t bytes) {
  MESHCOMM_CHECK(step < kStepsPerPhase, "step " << step << " out of range");
  auto r = transport_.postRecv(peer, tags::collective(seq_, phaseBase_ + step), sig_, data, bytes);
  posted_.push_back(r);
  return r;
}

void Comm::wait(std::span<const RequestPtr> requests) {
  transport_.wait(requests, context_);
}

void Comm::waitAll() {
  if (posted_.empty()) return;
  transport_.wait(posted_, context_);
  posted_.clear();
}

void Comm::sendRecv(int sendPeer, const void* sendData, size_t sendBytes, int recvPeer,
                    void* recvData, size_t recvBytes, uint32_t step) {
  MESHCOMM_CHECK(step < kStepsPerPhase, "step " << step << " out of range");
  uint64_t tag = tags::collective(seq_, phaseBase_ + step);
  RequestPtr rs[2] = {transport_.postSend(sendPeer, tag, sig_, sendData, sendBytes),
                      transport_.postRecv(recvPeer, tag, sig_, recvData, recvBytes)};
  wait(rs);
}

}  // namespace meshcomm
