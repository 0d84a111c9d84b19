// parity_holder.h — the parity pieces this agent holds for the groups of an
// erasure-coded memory tier (issue 23, decisions 126–127): one
// ec::ParityAccumulator per (namespace, step, group) while the group's data
// members' parts arrive, and once every one of them is folded and verified,
// its sealed pieces and ParityRecord in this agent's tmpfs root:
//
//   <root>/<ns>/step_<0000000123>/group_<g>/parity_<j>   held piece j's bytes
//   <root>/<ns>/step_<0000000123>/group_<g>/record.json  written last
//
// where root is <agent root>/parity (tier/layout.h kParityDirName). A group some of whose parts never
// arrived has no file at all: nothing partial is ever published (a record
// exists only beside every piece it describes, each whole).
//
// The pieces of a group being folded are tmpfs files of the parity pool
// (replication/parity_piece_files.h, decision 163), folded in place; the seal
// renames them into the group's directory, and a drop moves them back to the
// pool, where the next group's pieces are taken from.
//
// Budget: the bytes of every held piece, folding (its pool file, as long as
// the longest part folded so far) or sealed (its tmpfs file), and the
// recycled files waiting in the pool, are counted against budget_bytes (the agent's --memory-budget, as each
// replica tier's are); a fold that would pass it is refused with
// kResourceExhausted naming the group, the bytes it needs and the budget,
// before any byte is read (the pool's recycled files are released first).
//
// Nothing under root is trusted to be what this layout says (tier/layout.h):
// the directories are reached and made from directory fds without following
// a symbolic link (OpenLayoutDir: a link in place of one is removed as a
// link, its target untouched), and the files are written and read there
// (decision 131). Only root's parent, the agent root, is opened by its path.
//
// At start, Recover re-indexes root (decision 132): a sealed group whose
// record and pieces check out is held again, anything else is removed.
//
// ReadPiece hands a sealed piece to a node rebuilding a lost member's part
// (decision 138). Scrub checks the sealed groups again while the agent runs
// (the agent's scrub calls it each pass, decision 160).
//
// Thread-safe. Folds run at once, those of one group included (decision
// 148): each member's part streams in, is checked and folded on its own
// request's thread, the group's accumulator serialising only each chunk's
// GF update, so a holder pulls its group's parts together rather than one
// after the other. Sealing (the pieces' checksums, their files, the record)
// runs under the group's own mutex, once, by the fold that completes the
// group; the holder's own mutex guards only the index and the budget.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/mutex.h"
#include "ec/parity_accumulator.h"
#include "ec/parity_record.h"
#include "ec/piece_io.h"
#include "os/fd.h"
#include "replication/parity_piece_files.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

struct ParityHolderOptions {
  std::string root;           // <agent root>/parity; made at the first sealed group
  uint64_t budget_bytes = 0;  // the agent's --memory-budget; 0 = no room at all
  size_t chunk_bytes = size_t{4} << 20;  // ParityAccumulatorConfig::chunk_bytes
  // The pool of piece files (parity_piece_files.h); empty: <agent root>/parity_pool.
  std::string pool_dir;
};

// Which piece of which group a part is, from the layout
// (cluster/parity_groups.h) both ends agree on.
struct ParityFoldTarget {
  std::string ns;
  uint64_t step = 0;
  uint32_t group = 0;
  uint32_t k = 0;
  uint32_t m = 0;
  uint32_t members = 0;         // the group's data members (< k in a short last group)
  uint32_t index = 0;           // the part's data index in the group
  std::vector<uint32_t> held;   // the parity pieces this holder keeps, increasing
};

struct ParityFoldState {
  uint32_t folded = 0;   // data members folded and verified
  uint32_t members = 0;  // of how many
  bool sealed = false;   // every one, and the pieces and record are written
};

// What ParityHolder::Recover found under root.
struct ParityRecoveryReport {
  uint32_t groups = 0;          // sealed groups held again, every piece checked
  uint64_t bytes = 0;           // their pieces' bytes, now counted against the budget
  std::vector<Status> removed;  // each thing removed and why (each logged too)
};

// What a Scrub pass found.
struct ParityScrubReport {
  uint32_t groups = 0;          // sealed groups whose record and every piece checked out
  uint64_t bytes = 0;           // their pieces' bytes, hashed
  std::vector<Status> dropped;  // each group that did not, dropped, and why (each logged too)
};

// A part's objects (name, size, checksum, by name), from its manifest or
// from the record of a sealed group: what tells a member's retry (the same
// part) from another version of its part (the step deleted and committed
// again while a holder kept the old parity).
std::string ParityPartIdentity(const Manifest& part);
std::string ParityPartIdentity(const ec::DataPiece& piece);

class ParityHolder {
 public:
  explicit ParityHolder(ParityHolderOptions options);
  ParityHolder(const ParityHolder&) = delete;
  ParityHolder& operator=(const ParityHolder&) = delete;

  // Folds `part` (its objects read from source) into the group's held
  // pieces as data piece target.index, and seals the group when it was the
  // last: writes each piece, then the record. Folding the index again with
  // the same member's part once it is in answers the state without reading
  // anything (a member retrying after a lost answer); the same member with
  // another part (other objects or checksums: the step committed again) is
  // kFailedPrecondition, never answered with the old parity's state.
  // Errors: kInvalidArgument for a target that does not match the group's
  // earlier folds (code, members or pieces held) or a bad name; kAlreadyExists
  // for the index folded from another member; kResourceExhausted over the
  // budget; the accumulator's (kCorruption for a part that does not match its
  // checksums, the source's error; the parity is then as before); a failed
  // write of the sealed pieces (the group then forgets everything and must be
  // folded again). Each names the group and the member.
  // timings, when given, receives where the fold's time went (the log line).
  Result<ParityFoldState> Fold(const ParityFoldTarget& target, const Manifest& part, ec::ObjectSource& source,
                               ec::FoldTimings* timings = nullptr);

  // Re-indexes root at agent start, before any other call (it is not
  // meant to run beside folds), after loading the pool of piece files
  // (their bytes count against the budget from then on). A group directory whose record.json parses,
  // names the (namespace, step, group) its path says and describes pieces
  // that are all there, regular files of the record's length whose XXH3
  // matches, is held again as sealed (Record answers it, a member folding
  // again gets "sealed", Drop removes it) and its pieces' bytes are counted
  // against the budget, even past it (new folds are then refused until room
  // is made; logged). Anything else is logged, reported and removed, never
  // trusted: a group without a record (a fold interrupted while writing), a
  // record that does not parse or does not match its path, a missing,
  // short or damaged piece, a stray file (a leftover .tmp), an entry whose
  // name is not of the layout, a link (removed as a link, layout.h). Empty
  // step and namespace directories go too. Errors: a failure to open or
  // list root or to remove what must go (the rest is still walked; the
  // first such error is returned).
  Result<ParityRecoveryReport> Recover();
  // Checks every sealed group as Recover does (its record parses and names
  // it, each piece is there, of the record's length, and hashes to the
  // record's checksum), one file read at a time, no mutex held while
  // hashing; a group that fails is dropped (DropGroup) and reported. Groups
  // dropped or sealed meanwhile are skipped. Stops early when stopping()
  // says so. Errors: root cannot be opened.
  Result<ParityScrubReport> Scrub(const std::function<bool()>& stopping = {});

  // The group's state now, or once it is sealed, whichever comes first by
  // deadline. A group never folded is {0, 0, false}.
  ParityFoldState WaitSealed(std::string_view ns, uint64_t step, uint32_t group,
                             std::chrono::steady_clock::time_point deadline);

  // The sealed group's record, read back from its file: kNotFound when the
  // group is not sealed here (never seen, or some parts missing), kCorruption
  // for a damaged file.
  Result<ec::ParityRecord> Record(std::string_view ns, uint64_t step, uint32_t group) const;
  // Parity piece j of the sealed group, read whole from its file, with the
  // checksum the record gives it (for a replacement node rebuilding a lost
  // part, decision 138). The bytes are not hashed here: the caller sends the
  // record's checksum as the stream's, so damage at rest fails on arrival.
  // kNotFound when the group is not sealed here or its record describes no
  // piece j; kCorruption for a damaged record or a file of another length.
  struct HeldPiece {
    std::string bytes;
    std::string checksum;  // the record's, "xxh3-64:<16 hex>"
  };
  Result<HeldPiece> ReadPiece(std::string_view ns, uint64_t step, uint32_t group, uint32_t j) const;
  // Where piece j of the group is (or would be) kept.
  std::string PiecePath(std::string_view ns, uint64_t step, uint32_t group, uint32_t j) const;

  // Forgets every group of (ns, step), folding or sealed, and removes its
  // files (this holder's own retention, or a delete on the members). Waits
  // for a fold in flight of those groups to end. Returns whether it held
  // anything.
  Result<bool> Drop(std::string_view ns, uint64_t step);
  // The same for one group of the step only (a data member of that group
  // deleted its part: PeerService scopes a peer's DropParity to the group
  // the caller is a data member of, decision 131). An empty step directory
  // may stay behind (a fold of another group of the step may be writing
  // there).
  Result<bool> DropGroup(std::string_view ns, uint64_t step, uint32_t group);

  // Bytes of held pieces (folding or sealed) counted against the budget now.
  uint64_t used_bytes() const;
  // Bytes of recycled piece files waiting in the pool (counted too).
  uint64_t pool_bytes() const { return files_.pool_bytes(); }

 private:
  struct Group {
    explicit Group(ParityFoldTarget t) : target(std::move(t)) {}
    const ParityFoldTarget target;  // index unused
    // Held to seal the group, and to drop its accumulator.
    Mutex fold_mu;
    // Shared with the folds in flight, which fold into it without fold_mu
    // (it is thread-safe); reset once sealed or dropped.
    std::shared_ptr<ec::ParityAccumulator> acc GUARDED_BY(fold_mu);
    // Guarded by the holder's mu_ (the analysis cannot name it from here).
    uint32_t folding = 0;               // folds in flight (a drop waits for them)
    std::vector<std::string> by_index;  // member folded at each index ("" = not yet)
    std::vector<std::string> part_of;   // the part folded at each index (ParityPartIdentity)
    uint64_t reserved = 0;              // bytes counted against the budget
    bool sealed = false;
    bool dropped = false;
  };
  using Key = std::tuple<std::string, uint64_t, uint32_t>;

  std::string GroupDir(std::string_view ns, uint64_t step, uint32_t group) const;
  // "<ns>/step_<n>/group_<g>": the group's directory below root.
  static std::string GroupRel(std::string_view ns, uint64_t step, uint32_t group);
  // root, opened from its parent without following a link; with create it
  // is made (a non-directory there removed as layout.h says), without it a
  // missing root is nullopt.
  Result<std::optional<UniqueFd>> OpenRoot(bool create) const;
  // Forgets group `group` of (ns, step), or every group of the step when
  // nullopt, and removes their files.
  Result<bool> DropWhere(std::string_view ns, uint64_t step, std::optional<uint32_t> group);
  static ParityFoldState StateOf(const Group& g);
  // Writes the held pieces and then the record; the caller holds g.fold_mu.
  Status WriteSealed(Group& g, const ec::ParityRecord& record) REQUIRES(g.fold_mu);
  // Sets g's reservation to bytes; kResourceExhausted (unchanged) when over.
  Status ReserveLocked(Group& g, uint64_t bytes, std::string_view what) REQUIRES(mu_);

  // Recover's walk of one namespace, step and group directory (parity_recover.cc).
  Status RecoverNamespace(int root_fd, const std::string& ns, ParityRecoveryReport* report);
  Status RecoverStep(int ns_fd, const std::string& ns, uint64_t step, ParityRecoveryReport* report);
  // The group's record when its directory checks out; otherwise the reason
  // it does not (the caller removes it).
  Result<ec::ParityRecord> CheckGroup(int group_fd, const std::string& ns, uint64_t step, uint32_t group) const;
  // Holds the checked group again as sealed, counted against the budget.
  void AdoptSealed(const ec::ParityRecord& record) EXCLUDES(mu_);

  // Forgets g (under key): its reservation back, its entry gone.
  void ForgetLocked(Group& g, const Key& key) REQUIRES(mu_);

  // Moves the held piece files of the group directory `group` of step_fd
  // (at path) into the pool; what is left is the caller's to remove.
  void RecyclePieces(int step_fd, const std::string& group, const std::string& path);

  const ParityHolderOptions options_;
  // Before groups_: a group's accumulator gives its piece files back here
  // when it goes.
  ParityPieceFiles files_;

  mutable Mutex mu_;
  CondVar sealed_cv_{&mu_};  // a group sealed, forgotten, or its last fold in flight ended
  // Held, never with mu_, while a seal opens or makes <ns>/step_N and makes
  // its group directory there, and while a drop removes a step or namespace
  // directory it emptied: a drop never removes a directory between a seal's
  // open of it and the group it makes inside.
  Mutex dirs_mu_;
  std::map<Key, std::shared_ptr<Group>> groups_ GUARDED_BY(mu_);
  uint64_t used_ GUARDED_BY(mu_) = 0;
};

}  // namespace tierckpt::agent
