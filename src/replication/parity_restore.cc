// parity_restore.cc — see parity_restore.h.
#include "replication/parity_restore.h"

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "common/log.h"
#include "ec/piece_io.h"
#include "ec/rebuild.h"
#include "replication/parity_fetch.h"
#include "replication/parity_holder.h"
#include "replication/peer_part_source.h"
#include "replication/peer_store.h"
#include "store/mem_store.h"

namespace tierckpt::agent {
namespace {

std::string GroupLabel(uint32_t group, std::string_view ns, uint64_t step) {
  return "parity group " + std::to_string(group) + " of " + std::string(ns) + " step " + std::to_string(step);
}

uint64_t NowUnixMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : std::string(sep)) + p;
  return out;
}

// The records of the group's holders, each holder's own fetch kept for
// the pieces; `answers` says what each holder said.
struct Holders {
  std::optional<ec::ParityRecord> record;           // merged
  std::vector<std::unique_ptr<ParityFetch>> fetch;  // by parity index; null when the holder is unusable
  std::vector<std::string> answers;                 // "n5 (parity 0): <why>" for each unusable holder
};

Holders AskHolders(const cluster::ParityGroup& g, Replicator* replicator, std::string_view ns, uint64_t step) {
  Holders h;
  h.fetch.resize(g.parity.size());
  for (uint32_t j = 0; j < g.parity.size(); ++j) {
    const std::string& holder = g.parity[j];
    const std::string who = holder + " (parity " + std::to_string(j) + ")";
    std::optional<std::string> address = replicator->AddressOf(holder);
    if (!address) {
      h.answers.push_back(who + ": not in the peer list");
      continue;
    }
    auto fetch =
        std::make_unique<ParityFetch>(replicator->transport(), holder, *address, replicator->timeout());
    Result<ec::ParityRecord> r = fetch->Record(ns, step, g.index);
    if (!r.ok()) {
      h.answers.push_back(who + ": " + r.status().ToString());
      continue;
    }
    if (r->FindParity(j) == nullptr) {
      h.answers.push_back(who + ": its record describes no parity piece " + std::to_string(j));
      continue;
    }
    if (!h.record) {
      h.record = std::move(*r);
    } else if (Status merged = h.record->Merge(*r); !merged.ok()) {
      h.answers.push_back(who + ": its record differs from another holder's (" + merged.ToString() + ")");
      continue;
    }
    h.fetch[j] = std::move(fetch);
  }
  return h;
}

}  // namespace

Manifest PartManifestFromRecord(const ec::ParityRecord& record, uint32_t index, const std::string& node) {
  if (std::optional<Manifest> exact = record.PartManifest(index); exact && exact->node == node) return *exact;
  Manifest m;
  m.ns = record.ns;
  m.step = record.step;
  m.node = node;
  m.created_unix_ms = NowUnixMs();
  for (const ec::PieceObject& o : record.data[index].objects)
    m.objects.push_back({o.name, o.size, o.checksum, node});
  return m;
}

std::vector<std::string> HoldersNotSealed(const cluster::ParityGroup& g, Replicator* replicator, std::string_view ns,
                                          uint64_t step) {
  return AskHolders(g, replicator, ns, step).answers;
}

Result<ec::ParityRecord> GroupRecord(const ParitySender& me, Replicator* replicator, std::string_view ns,
                                     uint64_t step) {
  Holders h = AskHolders(me.group(), replicator, ns, step);
  if (!h.record) {
    return NotFound("no parity holder of " + GroupLabel(me.group().index, ns, step) + " has it sealed (" +
                    Join(h.answers, "; ") + ")");
  }
  return std::move(*h.record);
}

Result<std::string> RestoreFromParity(const ParitySender& me, Replicator* replicator, MemoryTier* tier,
                                      std::string_view ns, uint64_t step) {
  return RebuildPart({&me.group(), me.layout().k, me.layout().m, me.index(), "this node, its memory lost", "", false},
                     replicator, tier, ns, step);
}

Result<std::string> RestoreMemberFromParity(const cluster::ParityLayout& layout, std::string_view member,
                                            Replicator* replicator, MemoryTier* copy, std::string_view ns,
                                            uint64_t step, std::string_view object) {
  const cluster::ParityGroup* g = layout.GroupOf(member);
  if (g == nullptr) return NotFound("node " + std::string(member) + " is in no parity group of this cluster");
  uint32_t index = 0;
  while (index < g->data.size() && g->data[index] != member) ++index;
  return RebuildPart({g, layout.k, layout.m, index, "unreachable, and none of its replica holders has its part",
                      std::string(object), true},
                     replicator, copy, ns, step);
}

Result<std::string> RebuildPart(const LostPart& target, Replicator* replicator, MemoryTier* tier,
                                std::string_view ns_view, uint64_t step) {
  const std::string ns(ns_view);
  const cluster::ParityGroup& g = *target.group;
  const uint32_t k = target.k;
  const uint32_t m = target.m;
  const uint32_t lost = target.lost;
  const uint32_t members = static_cast<uint32_t>(g.data.size());
  if (lost >= members) return InvalidArgument("data index " + std::to_string(lost) + " is past the group's members");
  const std::string self = g.data[lost];
  const std::string label = GroupLabel(g.index, ns, step);
  const auto t0 = std::chrono::steady_clock::now();

  Holders h = AskHolders(g, replicator, ns, step);
  std::vector<std::string> gone = h.answers;
  gone.insert(gone.begin(), self + " (data " + std::to_string(lost) + "): " + target.lost_why);
  // A read of one object of another member's part: nothing moves unless the
  // record places it in that part.
  if (!target.object.empty() && h.record && lost < h.record->data.size()) {
    bool holds = false;
    for (const ec::PieceObject& o : h.record->data[lost].objects) holds = holds || o.name == target.object;
    if (!holds) {
      return NotFound(label + " places no object " + target.object + " in node " + self + "'s part");
    }
  }
  // The other data members' parts, as the record describes them.
  std::vector<std::unique_ptr<PeerObjectStore>> stores(members);
  std::vector<std::unique_ptr<Manifest>> parts(members);
  bool spans = false;
  for (uint32_t i = 0; i < members; ++i) {
    if (i == lost) continue;
    const std::string who = g.data[i] + " (data " + std::to_string(i) + ")";
    std::optional<std::string> address = replicator->AddressOf(g.data[i]);
    if (!address) {
      gone.push_back(who + ": not in the peer list");
      continue;
    }
    auto store = std::make_unique<PeerObjectStore>(
        replicator->transport(), PeerStoreTarget{g.data[i], *address, g.data[i]}, replicator->timeout());
    Result<Manifest> part = store->ReadManifest(ns, step);
    if (!part.ok()) {
      gone.push_back(who + ": " + part.status().ToString());
      continue;
    }
    if (h.record &&
        (i >= h.record->data.size() || ParityPartIdentity(*part) != ParityPartIdentity(h.record->data[i]))) {
      gone.push_back(who + ": its part is not the one the parity was computed over");
      continue;
    }
    spans = spans || part->SpansNodes();
    stores[i] = std::move(store);
    parts[i] = std::make_unique<Manifest>(std::move(*part));
  }
  const uint32_t pieces = members + static_cast<uint32_t>(g.parity.size());
  const uint32_t gone_count = static_cast<uint32_t>(gone.size());
  const std::string counts = std::to_string(gone_count) + " of its " + std::to_string(pieces) +
                             " pieces are gone (M = " + std::to_string(m) + ")";
  if (!h.record || gone_count > m) {
    return FailedPrecondition(label + ": " + counts + ", so this node's part cannot be rebuilt from parity" +
                              (h.record ? "" : " (no holder has the group sealed)") + ": " +
                              Join(gone, "; "));
  }
  const ec::ParityRecord& record = *h.record;
  if (record.data.size() != members || record.data[lost].member != self || record.k != k || record.m != m) {
    return FailedPrecondition(
        label + ": the holders' record is not of this agent's layout (rs:" + std::to_string(record.k) + "+" +
        std::to_string(record.m) + ", " + std::to_string(record.data.size()) + " data members, index " +
        std::to_string(lost) + " is node " + (lost < record.data.size() ? record.data[lost].member : "none") +
        "); give every agent the same peer list and --redundancy");
  }
  // The lost part's own manifest fields are in the record (decision 141);
  // a record written before has none, and a part of a step spanning nodes
  // cannot be republished without its membership.
  if (spans && !record.data[lost].part) {
    return FailedPrecondition(label +
                              ": the step spans nodes, and a part of such a step is not rebuilt from "
                              "parity yet (its record does not carry the part's members)");
  }

  std::vector<std::unique_ptr<PeerPartSource>> part_sources;
  std::vector<std::unique_ptr<PeerPieceSource>> piece_sources;
  std::vector<ec::Survivor> survivors;
  std::vector<std::string> used_names;
  for (uint32_t i = 0; i < members; ++i) {
    if (parts[i] == nullptr) continue;
    part_sources.push_back(std::make_unique<PeerPartSource>(stores[i].get(), *parts[i]));
    survivors.push_back(ec::Survivor{i, part_sources.back().get(), nullptr});
  }
  for (uint32_t j = 0; j < h.fetch.size(); ++j) {
    if (h.fetch[j] == nullptr) continue;
    piece_sources.push_back(
        std::make_unique<PeerPieceSource>(h.fetch[j].get(), ns, step, g.index, j, record.PieceLength()));
    survivors.push_back(ec::Survivor{k + j, nullptr, piece_sources.back().get()});
  }
  ec::MemoryObjectSink sink;
  Result<ec::RebuildReport> rebuilt = ec::RebuildPiece(record, lost, survivors, sink);
  if (!rebuilt.ok()) return rebuilt.status().WithContext("rebuilding node " + self + "'s part from " + label);
  for (const auto& [piece, why] : rebuilt->rejected) {
    Log(LogLevel::kWarn, "parity_survivor_rejected")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("group", g.index)
        .Kv("piece", static_cast<uint64_t>(piece))
        .Err(why);
  }
  std::vector<std::string> data_used;
  std::vector<std::string> parity_used;
  for (uint32_t piece : rebuilt->used) {
    if (piece < members) data_used.push_back(g.data[piece]);
    if (piece >= k) parity_used.push_back(g.parity[piece - k]);
  }

  // Restore reads the part from a store and checks every object again.
  const Manifest part = PartManifestFromRecord(record, lost, self);
  MemObjectStore staging("parity-rebuild");
  for (const auto& [name, bytes] : sink.objects()) {
    TC_RETURN_IF_ERROR(staging.PutObject(ns, step, name, bytes.data(), bytes.size()));
  }
  TC_RETURN_IF_ERROR(
      staging.CommitStep(part).WithContext("staging node " + self + "'s rebuilt part of " + label));
  TC_RETURN_IF_ERROR(tier->Restore(staging, ns, step)
                         .WithContext("restoring node " + self + "'s part rebuilt from " + label));
  const std::string from = "parity group " + std::to_string(g.index) + ": data " +
                           (data_used.empty() ? std::string("none") : Join(data_used, ", ")) + "; parity " +
                           (parity_used.empty() ? std::string("none") : Join(parity_used, ", "));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Log(LogLevel::kInfo, target.as_copy ? "part_rebuilt_from_parity" : "restored_from_parity")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("group", g.index)
      .Kv("member", self)
      .Kv("data", Join(data_used, ","))
      .Kv("parity", Join(parity_used, ","))
      .Kv("bytes", part.TotalBytes())
      .Kv("ms", ms);
  return from;
}

}  // namespace tierckpt::agent
