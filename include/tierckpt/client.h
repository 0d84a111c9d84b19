// tierckpt/client.h — the C++ client of the node agent (tierckptd).
//
// A Client is one connection to the local agent over its Unix socket. It
// writes a step's objects straight into the agent's shared memory (the agent
// passes each object's tmpfs fd; the client maps it and copies once), seals
// them, commits the step, and reads committed objects back through read-only
// mappings. Bulk bytes never cross the socket.
//
// Typical save:
//   TC_ASSIGN_OR_RETURN(auto c, Client::Connect({}));
//   TC_RETURN_IF_ERROR(c->BeginStep("job1", 100));
//   TC_RETURN_IF_ERROR(c->WriteObject("job1", 100, "__0_0.distcp", buf, len));
//   TC_ASSIGN_OR_RETURN(Manifest m, c->Commit("job1", 100, {.persist = true}));
//   TC_RETURN_IF_ERROR(c->WaitDurable("job1", 100, std::chrono::minutes(5)));
//
// Thread safety: a Client is safe for concurrent use; requests on its one
// connection are serialised internally, while copies into or out of shared
// memory run outside that lock, so several threads can fill different
// objects at once. WritableObject and ObjectView are thread-compatible.
//
// Errors: every call returns Status/Result. kUnavailable means the agent is
// not reachable (the message names the socket and how to start the agent);
// other codes are the agent's answer, passed through with its message.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt {

// The agent socket used when none is configured: $TIERCKPT_SOCKET if set,
// else $XDG_RUNTIME_DIR/tierckpt/agent.sock if XDG_RUNTIME_DIR is set, else
// /run/tierckpt/agent.sock for root, else /tmp/tierckpt-<uid>/agent.sock.
// Whatever the path, Connect trusts it only if its directory is private to
// the agent's uid and the agent runs as that uid or root (agent_uid below).
std::string DefaultSocketPath();

struct ClientOptions {
  std::string socket_path;          // "" = DefaultSocketPath()
  std::string client_name = "cpp";  // shown in the agent's log
  // Who writes the steps this client writes: one writer per step. The agent
  // lets only the writer that began a step add to, seal, commit or abort it;
  // any other gets kAlreadyExists naming the owner, and nothing of it lands.
  // Give every process of one job (all its ranks, on every node) the same
  // id, and different jobs, or incarnations of a job, different ids: the
  // tierckpt CLI uses a fresh random id per command, the Python front the
  // job's identity (TIERCKPT_WRITER_ID, else torchrun's run id and restart
  // count, else MASTER_ADDR:MASTER_PORT). "" = anonymous: shares steps with
  // other anonymous clients only, as every client did before writer ids.
  // At most 128 bytes of [A-Za-z0-9_.:@/+=-].
  std::string writer_id;
  // A fresh random writer id ("w-" and 32 hex digits) for a process that is
  // a whole job on its own (the CLI, a test writer).
  static std::string RandomWriterId();
  int copy_threads = 2;  // parallel copies across objects in WriteObjects/ReadObjects
  // Who checksums an object that WriteObject saves. true (default): the
  // client hashes each 512 KiB piece of shared memory right after copying it
  // there (from cache: one pass over the source, no second pass over the
  // destination), and the agent records that checksum (it hashes again only
  // with --verify-on-seal). false: the client does a plain memcpy and the
  // agent hashes the bytes at rest, asynchronously, while the client copies
  // the next object; CommitStep waits for it — a second pass over memory that
  // competes with the copy on small machines (docs/decisions.md #2). Either
  // way the manifest's checksum is the checksum of the bytes in shared memory.
  // With true the agent never hashes those bytes itself (unless
  // --verify-on-seal), so until its scrub or a Verify does they count as not
  // verified by the agent: ReadVerify::Attested reads hash them.
  bool client_checksum = true;
  // Mappings of recycled shared-memory segments kept across saves, so a
  // steady-state save costs one memcpy and no page faults. Bytes of address
  // space; 0 disables the cache.
  uint64_t mapping_cache_bytes = 16ull << 30;
  // Seal makes the client's mapping of the object read-only (mprotect), so a
  // stray write through a kept mapping (the cache above keeps them for the
  // next save) faults instead of changing a committed step; the mapping is
  // made writable again when the agent hands the segment out for a new
  // object. Off by default: on the 2-core VM with 4 KiB tmpfs pages the two
  // mprotect calls cost ~7-15 ms per 64 MiB, 20-30% of a steady save
  // (docs/benchmarks-fastpath.md). It is the precondition of reads that
  // trust the agent's verification instead of re-hashing.
  bool protect_sealed = false;

  // ---- Trust and time limits (docs/protocol.md, "Limits and timeouts") ----
  // The uid the agent must run as: Connect refuses, naming both uids, an
  // agent running as anyone else (root is always accepted) and a socket
  // whose directory another user owns or may write. -1 = this process's
  // effective uid; set it to use another user's agent on purpose (a root
  // client reading a user's checkpoints).
  int64_t agent_uid = -1;
  // Connecting and the Hello exchange, including waiting for room in the
  // agent's accept queue. Milliseconds; < 0 = no limit.
  int connect_timeout_ms = 10'000;
  // Each request that only does local work in the agent (BeginStep,
  // CreateObject, Seal, Abort, Stats, Shutdown): sending it and its answer.
  int request_timeout_ms = 60'000;
  // Each request that may move a step's bytes or reach the durable tier or
  // peers (Commit, Open, Restore, Verify, List, Show, DeleteStep, Prune,
  // Persist). WaitDurable waits its own timeout plus one minute instead.
  int long_request_timeout_ms = 3'600'000;
};

// How a read checks the bytes it hands out (Client::OpenVerified,
// Client::ReadObjects; docs/benchmarks-fastpath.md, "The integrity scheme").
//   kAlways    (default) the client re-hashes every object before use.
//   kAttested  the client skips its hash when the agent answers that it found
//              the object's bytes at rest matching the manifest at most
//              max_age ago (its hash after seal, a restore, its periodic
//              scrub: tierckptd --scrub-interval), and re-hashes otherwise
//              (never verified by the agent, or longer ago). What it gives
//              up: a bit flip at rest younger than the agent's last check is
//              loaded unnoticed (the scrub, persist and replication still
//              find it later).
//   kNever     no hash at all: the bytes are used as the tier holds them.
struct ReadVerify {
  enum class Mode { kAlways, kAttested, kNever };
  Mode mode = Mode::kAlways;
  std::chrono::milliseconds max_age = std::chrono::minutes(15);  // kAttested only

  static ReadVerify Always() { return {}; }
  static ReadVerify Attested(std::chrono::milliseconds max_age) { return {Mode::kAttested, max_age}; }
  static ReadVerify Never() { return {Mode::kNever, {}}; }
};
// "always" | "attested" | "never"; kInvalidArgument naming the three otherwise.
Result<ReadVerify::Mode> ParseReadVerifyMode(std::string_view text);
std::string_view ReadVerifyModeName(ReadVerify::Mode mode);

// What a client's reads did, since Connect (Client::read_counters()).
struct ReadCounters {
  uint64_t hashed = 0;      // objects the client hashed (kAlways, or kAttested not attested)
  uint64_t attested = 0;    // objects kAttested handed out unhashed on the agent's word
  uint64_t unverified = 0;  // objects kNever handed out unhashed
};

// A freshly created object: fill data()[0..size()) then Client::Seal() it.
// After Seal the bytes are immutable (never write them again); the mapping
// stays valid, and reserved for this object, until the WritableObject is
// destroyed. Destroying it without sealing leaves the object unsealed; the
// step cannot commit with it, and the agent drops it when the step is aborted.
class WritableObject {
 public:
  WritableObject();
  ~WritableObject();
  WritableObject(WritableObject&&) noexcept;
  WritableObject& operator=(WritableObject&&) noexcept;

  uint8_t* data() const;
  size_t size() const;
  const std::string& name() const;

 private:
  friend class Client;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One contiguous run of a scatter/gather copy between an object and the
// caller's memory (CopyIn, CopyOut): `size` bytes at `offset` in the object
// and at `address` in the caller's memory. 24 bytes, no padding, so that a
// front end can pass an array of them as packed native uint64 triples.
class ObjectView;

struct CopyRun {
  uint64_t offset = 0;   // within the object
  uint64_t address = 0;  // of the caller's memory: the source (CopyIn) or the destination (CopyOut)
  uint64_t size = 0;
};
static_assert(sizeof(CopyRun) == 3 * sizeof(uint64_t));

// Copies every run from the caller's memory into object (CopyIn) or from a
// committed object into the caller's memory (CopyOut), `threads` at a time
// (1..64; the bytes are split evenly, runs cut where needed). One call for
// thousands of small tensors instead of one copy call each.
// Contracts: every run ends within the object, else kInvalidArgument naming
// the first that does not, before any byte is copied; the caller guarantees
// that each address holds `size` bytes it may read (CopyIn) or write
// (CopyOut) for the whole call and that no run overlaps another's
// destination. CopyOut verifies only a view whose hash is due
// (Client::OpenToCopy, view.hash_due()): it then hashes the whole object in
// its pass over the bytes, on one thread (one hash cannot be split), and
// returns kCorruption after copying if they do not match the manifest (the
// destinations then hold those bytes). Any other view is copied as opened:
// open it with the ReadVerify mode you need first. Call view.Unchanged()
// after the copy either way.
Status CopyIn(const WritableObject& object, const CopyRun* runs, size_t count, int threads = 1);
Status CopyOut(const ObjectView& view, const CopyRun* runs, size_t count, int threads = 1);

// A read-only view of a committed object held by the memory tier.
class ObjectView {
 public:
  ObjectView();
  ~ObjectView();
  ObjectView(ObjectView&&) noexcept;
  ObjectView& operator=(ObjectView&&) noexcept;

  const uint8_t* data() const;
  size_t size() const;
  const std::string& name() const;      // the object's name in its step
  const std::string& checksum() const;  // from the manifest
  // "" unless the agent replaced a corrupt copy before handing out this one
  // (Client::OpenVerified): which copy was corrupt and where it read the
  // step from instead.
  const std::string& repaired() const;
  // How long ago the agent last found these bytes matching checksum() when
  // it handed them out; nullopt if it never verified them in memory.
  std::optional<std::chrono::milliseconds> verified_age() const;
  // True for a view of Client::OpenToCopy whose bytes no CopyOut has verified
  // yet: read nothing through data() until one has.
  bool hash_due() const;
  // Recomputes the checksum; kCorruption naming the object on mismatch.
  Status Verify() const;
  // Copies into dst (capacity >= size()) and verifies in the same pass.
  Status CopyTo(void* dst, size_t capacity) const;
  // Ok while the file under this view is still the committed object the
  // agent handed out. Once a step is dropped (evicted, deleted, or replaced by
  // a repair) its files are recycled for other objects (renamed, truncated:
  // docs/agent.md, "What clients must know about recycling"), which changes
  // the file's ctime before any new byte is written; kCorruption naming the
  // object then. Call it after using the bytes: bytes read before it returns
  // Ok were the object's (a hash of them and a copy of them agree).
  Status Unchanged() const;

 private:
  friend class Client;
  friend Status CopyOut(const ObjectView& view, const CopyRun* runs, size_t count, int threads);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct CommitOptions {
  uint32_t world_size = 0;
  bool persist = false;                       // also persist this step to the durable tier
  std::vector<std::string> expected_objects;  // empty: every sealed object
  // The node ids the step spans, when its ranks wrote through several nodes'
  // agents (docs/multinode.md); empty for a step written on this node only.
  // The agent then commits every other member's part first, through the
  // peers (which it must have: --peers), and its own last.
  std::vector<std::string> members;
};

// One line of `tierckpt ls`: a step and its state in each tier.
struct StepSummary {
  std::string ns;
  uint64_t step = 0;
  uint64_t bytes = 0;
  uint32_t objects = 0;
  std::string memory;         // "committed", "writing", or "" (absent)
  std::string durable;        // "committed", "pending", "failed", or "" (absent/unknown)
  std::string durable_error;  // why a persist failed, or why a durable manifest is damaged
  // This node's parity state under --redundancy rs:K+M: "pending",
  // "redundant", "incomplete", "unknown"; "" without parity.
  std::string parity;
};

// A listing, and whether the durable tier answered it.
struct StepListing {
  std::vector<StepSummary> steps;  // sorted by (ns, step)
  // Why the durable tier could not be listed ("" = it was, or there is none):
  // the durable columns then come from the agent's own persist states only.
  std::string durable_error;
};

// Where a source object's bytes are, for WriteObjects.
struct ObjectSource {
  std::string name;
  const void* data = nullptr;
  size_t size = 0;
};
// The names CreateNextObject chooses from: <prefix><n><suffix>, n in decimal
// from first up.
struct ObjectNamePattern {
  std::string prefix;
  uint64_t first = 0;
  std::string suffix;
};
struct ObjectDest {
  std::string name;
  void* data = nullptr;
  size_t size = 0;  // must equal the object's size
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& node_id() const;
  const std::string& socket_path() const;
  // The agent's durable base URL, "" if it has none.
  const std::string& durable_base() const;

  // ---- Writing a step ----
  // Declares that this connection writes (ns, step). Several connections may
  // write the same step (one per local rank). kAlreadyExists if committed.
  Status BeginStep(std::string_view ns, uint64_t step);
  // A writer that saves one step after another begins each with BeginSave
  // instead: the agent first aborts the steps of ns that this connection
  // created objects in with CreateNextObject and that are still being
  // written (what an earlier failed save left half-written), then begins step.
  Status BeginSave(std::string_view ns, uint64_t step);
  Result<WritableObject> CreateObject(std::string_view ns, uint64_t step, std::string_view name,
                                      uint64_t size);
  // Creates the first object <prefix><n><suffix> for n = pattern.first,
  // pattern.first + 1, ... that is not sealed in the step yet (an earlier
  // attempt at the step may have sealed some), trying at most
  // 64 names; the object's name() is the one taken and *index (if given)
  // receives its n. kAlreadyExists if all are sealed, or (as CreateObject) if
  // the step is committed or another writer owns it.
  Result<WritableObject> CreateNextObject(std::string_view ns, uint64_t step,
                                          const ObjectNamePattern& pattern, uint64_t size,
                                          uint64_t* index = nullptr);
  // BeginSave(ns, step) then CreateNextObject in one round trip: the first
  // request of a writer's save (its errors are either's). An agent older than
  // this request answers it with a protocol error ("unknown request type").
  Result<WritableObject> BeginSaveCreateNext(std::string_view ns, uint64_t step,
                                             const ObjectNamePattern& pattern, uint64_t size,
                                             uint64_t* index = nullptr);
  // checksum: "" lets the agent compute it; otherwise the agent verifies it.
  Status Seal(WritableObject& object, std::string_view checksum = "");
  // Create + one-pass copy-and-checksum + seal.
  Status WriteObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                     size_t size);
  // WriteObject for many objects, copy_threads at a time.
  Status WriteObjects(std::string_view ns, uint64_t step, const std::vector<ObjectSource>& objects);
  // Commits the step in the memory tier once every expected object is sealed
  // and verified; returns the manifest. For a step spanning nodes
  // (options.members) that is this node's part, with Manifest::span summing
  // every member's part (decision 103).
  Result<Manifest> Commit(std::string_view ns, uint64_t step, const CommitOptions& options);
  // Drops an uncommitted step and its objects.
  Status Abort(std::string_view ns, uint64_t step);

  // ---- Durable tier ----
  // Asks the agent to persist a committed step (no-op if already durable).
  Status Persist(std::string_view ns, uint64_t step);
  // Waits until the step is committed in the durable tier. kTimeout after
  // timeout (zero = wait forever); the persist error if persisting failed.
  Status WaitDurable(std::string_view ns, uint64_t step, std::chrono::milliseconds timeout);
  // Brings a durable step into the memory tier (verifying every object).
  Status Restore(std::string_view ns, uint64_t step);

  // ---- Reading ----
  // Steps of ns ("" = all), in every tier, sorted by (ns, step).
  Result<std::vector<StepSummary>> List(std::string_view ns = "");
  // The same, plus the durable tier's listing error (an unreachable S3
  // endpoint, bad credentials): what `tierckpt ls` reports.
  Result<StepListing> Listing(std::string_view ns = "");
  // The newest step committed in any tier; kNotFound if none.
  Result<uint64_t> LatestStep(std::string_view ns);
  // The manifest from memory, else from durable.
  Result<Manifest> Show(std::string_view ns, uint64_t step);
  // Maps a committed object from memory, restoring the step from durable
  // first when memory lacks it.
  Result<ObjectView> Open(std::string_view ns, uint64_t step, std::string_view name);
  // Open + Verify (as `verify` says: ReadVerify). On a checksum mismatch asks
  // the agent, once, to check and repair its copy (it re-hashes it, drops it
  // if corrupt and restores the step from the replica holders or the durable
  // tier: docs/agent.md, "The read path"), then verifies the copy it hands
  // out instead; repaired() on the view says what the agent did. kCorruption
  // naming the object when no tier holds a sound copy.
  Result<ObjectView> OpenVerified(std::string_view ns, uint64_t step, std::string_view name,
                                  const ReadVerify& verify = {});
  // OpenVerified for a caller that copies the object out next: the hash
  // `verify` asks of the client is left to the first CopyOut of the view,
  // which does it in its own pass over the bytes instead of a pass before it
  // (hash_due() until then; decision 156). A CopyOut that finds the bytes
  // corrupt returns kCorruption: read the object again with OpenVerified,
  // which has the agent repair its copy. A file resized at rest is repaired
  // here, as OpenVerified does, and handed out verified.
  Result<ObjectView> OpenToCopy(std::string_view ns, uint64_t step, std::string_view name,
                                const ReadVerify& verify = {});
  // Open + CopyTo, for many objects, copy_threads at a time; a copy that
  // fails its checksum is repaired once as OpenVerified does. An object
  // `verify` does not hash (attested, or kNever) is a plain memcpy.
  Status ReadObjects(std::string_view ns, uint64_t step, const std::vector<ObjectDest>& objects,
                     const ReadVerify& verify = {});
  // What OpenVerified and ReadObjects did so far (thread-safe).
  ReadCounters read_counters() const;

  // ---- Administration (JSON bodies are documented in docs/protocol.md) ----
  Result<std::string> Verify(std::string_view ns, uint64_t step);
  Result<std::string> Stats();
  // Deletes a committed step from memory (and durable with durable_too),
  // and the replicas of it that this node's holders keep unless
  // keep_replicas (docs/protocol.md, DeleteStep).
  Status DeleteStep(std::string_view ns, uint64_t step, bool durable_too, bool keep_replicas = false);
  Result<std::string> Prune(std::string_view ns, uint32_t keep_memory, uint32_t keep_durable);
  // Has the agent persist ns to `base` from now on (its default base, or one
  // its --durable-allow patterns allow; docs/agent.md "Per-job durable
  // bases"); returns the base now used. kPermissionDenied for a base not
  // allowed, kFailedPrecondition while a step of ns is being persisted.
  Result<std::string> BindDurable(std::string_view ns, std::string_view base);
  // Declares the save policy of ns (docs/protocol.md, SetPolicy; decision
  // 118): keep_memory committed steps in memory, keep_durable durable steps,
  // and persist every step whose number is a multiple of persist_every; 0 =
  // the agent's own setting. The agent combines it with its flags (the
  // stricter retention, either cadence) and applies it at every commit of
  // ns, so the writer sends no Prune and computes no cadence. Send once per
  // connection and namespace. kFailedPrecondition while another open
  // connection holds a different policy of ns (the error names both), or for
  // keep_durable/persist_every on an agent without a durable tier;
  // kProtocolError from an agent older than SetPolicy (it closes the
  // connection: run one version of client and agent).
  Status SetPolicy(std::string_view ns, uint32_t keep_memory, uint32_t keep_durable, uint64_t persist_every);
  Status Shutdown();

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  // OpenObject: repair asks the agent to check and replace a corrupt copy.
  Result<ObjectView> OpenObject(std::string_view ns, uint64_t step, std::string_view name, bool repair);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierckpt
