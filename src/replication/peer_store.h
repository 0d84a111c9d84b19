// peer_store.h — another agent's memory tier, read over the peer transport,
// as a read-only ObjectStore: MemoryTier::Restore(peer_store, ns, step)
// copies a step from a peer exactly as it copies one from the durable tier
// (every object verified against the manifest, published last).
//
// A PeerObjectStore reads the steps of one origin node (peer_messages.h) from
// one peer: the peer's own steps (origin = the peer's node id) or the
// replicas the peer holds for another node (a replacement node asks its ring
// successor for its own data). Objects come whole, as one stream straight
// into the destination (the stream's XXH3 is checked on arrival; Restore
// then checks the manifest's checksum).
//
// Supported: Describe, ReadManifest, ListCommittedSteps, ObjectSize (from the
// manifest), ReadObject of a whole object (offset 0, its full size) and
// ReadObjectToFile. Writes, deletes, listings of namespaces and sweeps are
// kFailedPrecondition: a peer's tier is not ours to change.
//
// Connections are opened on demand (Connect with the peer's expected node
// id) and kept for the next call: concurrent calls (a restore reads several
// objects at once) each use their own. A call that fails with its connection
// broken drops it. Errors name the peer, the origin and the step.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "peer/transport.h"
#include "replication/peer_messages.h"
#include "store/object_store.h"

namespace tierckpt::agent {

struct PeerStoreTarget {
  std::string node_id;  // the peer (checked in the handshake)
  std::string address;  // where it listens
  std::string origin;   // whose data: node_id itself, or a node it holds replicas of
};

class PeerObjectStore final : public ObjectStore {
 public:
  // transport must outlive the store.
  PeerObjectStore(peer::Transport* transport, PeerStoreTarget target,
                  peer::Millis timeout = peer::Millis(30000));

  std::string Describe() const override;  // "peer n2 at 10.0.0.2:7100 (replica of n1)"
  Status PutObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                   size_t size) override;
  Status ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                    void* dst, size_t size) override;
  // ReadObject of a whole object into dst, returning the stream's XXH3: the
  // sender's checksum, which the bytes were checked against on arrival (a
  // mismatch is kCorruption), so the caller need not hash them again.
  Result<Checksum> ReadObjectVerified(std::string_view ns, uint64_t step, std::string_view name, void* dst,
                                      size_t size);
  // Pieces pwritten into fd as they arrive; the stream's verified XXH3 is
  // the returned checksum (no second pass over the file).
  Status ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                          uint64_t size) override;
  Result<std::string> ReadObjectToFileHashed(std::string_view ns, uint64_t step, std::string_view name, int fd,
                                             uint64_t size) override;
  Result<uint64_t> ObjectSize(std::string_view ns, uint64_t step, std::string_view name) override;
  Status CommitStep(const Manifest& manifest) override;
  Result<Manifest> ReadManifest(std::string_view ns, uint64_t step) override;
  Result<std::vector<uint64_t>> ListCommittedSteps(std::string_view ns) override;
  Result<std::vector<std::string>> ListNamespaces() override;
  Status DeleteStep(std::string_view ns, uint64_t step) override;
  Result<int> SweepUncommitted(std::string_view ns, const SweepOptions& options) override;

 private:
  // An idle connection, or a new one.
  Result<std::unique_ptr<peer::Connection>> Take();
  // Keeps a still-usable connection for the next call.
  void Give(std::unique_ptr<peer::Connection> conn);
  // Sends a request and returns the reply frame (kError replies become their
  // Status). Resets conn when it is no longer usable.
  Result<peer::Frame> Call(std::unique_ptr<peer::Connection>& conn, PeerMsg type, const PeerRequest& request);
  Status ReadOnly(std::string_view op) const;
  // Asks for the object and receives it into dst, or (dst null) into fd.
  Result<Checksum> ReceiveObject(std::unique_ptr<peer::Connection>& conn, std::string_view ns, uint64_t step,
                                 std::string_view name, const std::string& what, void* dst, int fd, size_t size);
  Result<Checksum> Fetch(std::string_view ns, uint64_t step, std::string_view name, void* dst, int fd,
                         size_t size);

  peer::Transport* const transport_;
  const PeerStoreTarget target_;
  const peer::Millis timeout_;
  const std::string describe_;

  Mutex mu_;
  std::vector<std::unique_ptr<peer::Connection>> idle_ GUARDED_BY(mu_);
  std::atomic<uint32_t> next_request_{1};
};

}  // namespace tierckpt::agent
