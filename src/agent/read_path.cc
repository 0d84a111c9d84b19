// ReadPath: memory → replica holders → other members' parts → durable, and
// the repair of a corrupt memory copy.
#include "agent/read_path.h"

#include <chrono>
#include <optional>

#include "common/checksum.h"
#include "common/log.h"
#include "common/names.h"
#include "tier/parts.h"
#include "tier/step_state.h"

namespace tierckpt::agent {

Status StepInNoTier(std::string_view ns, uint64_t step) {
  return NotFound("step " + StepLabel(ns, step) + " is in no tier; `tierckpt ls " + std::string(ns) +
                  "` lists what exists");
}

namespace {

std::string ObjectLabel(std::string_view ns, uint64_t step, std::string_view name) {
  return StepLabel(ns, step) + "/" + std::string(name);
}

// Re-hashes the committed object in tier; "" when it matches its manifest
// (recorded as a verification: MemoryTier::MarkVerified), else how it differs.
Result<std::string> Rehash(MemoryTier* tier, const std::string& ns, uint64_t step, const std::string& name) {
  const auto began = std::chrono::steady_clock::now();
  TC_ASSIGN_OR_RETURN(PinnedObject pinned, tier->ReadCommittedObject(ns, step, name));
  const std::string actual = ComputeChecksum(pinned.view.data(), pinned.view.size()).ToString();
  if (actual == pinned.checksum) {
    tier->MarkVerified(ns, step, pinned.instance, name, began);
    return std::string();
  }
  tier->MarkMismatch(ns, step, pinned.instance, name, began);
  return "hashes to " + actual + " but its manifest says " + pinned.checksum;
}

}  // namespace

// Holds the repair turn of one step: waits while another repair of it runs.
class ReadPath::RepairTurn {
 public:
  RepairTurn(ReadPath* path, std::string ns, uint64_t step) : path_(path), key_(std::move(ns), step) {
    MutexLock lock(&path_->mu_);
    while (path_->repairing_.contains(key_)) path_->cv_.Wait();
    path_->repairing_.insert(key_);
  }
  ~RepairTurn() {
    {
      MutexLock lock(&path_->mu_);
      path_->repairing_.erase(key_);
    }
    path_->cv_.SignalAll();
  }
  RepairTurn(const RepairTurn&) = delete;
  RepairTurn& operator=(const RepairTurn&) = delete;

 private:
  ReadPath* const path_;
  const std::pair<std::string, uint64_t> key_;
};

Result<ServedObject> ReadPath::Open(const std::string& ns, uint64_t step, const std::string& name,
                                    bool repair) {
  if (repair) return Repair(ns, step, name);
  TC_ASSIGN_OR_RETURN(Found found, OpenAnyTier(ns, step, name, /*turn_held=*/false));
  return ServedObject{std::move(found.object), ""};
}

Result<ReadPath::Found> ReadPath::OpenAnyTier(const std::string& ns, uint64_t step, const std::string& name,
                                              bool turn_held) {
  Found found;
  found.tier = d_.tier;
  Result<OpenedObject> opened = d_.tier->OpenObject(ns, step, name);
  if (!opened.ok() && opened.status().code() == Code::kNotFound) {
    if (!d_.tier->HasCommitted(ns, step)) {
      // A repair of the step may be between its drop and its restore: wait for its turn (decision 154).
      std::optional<RepairTurn> turn;
      if (!turn_held) turn.emplace(this, ns, step);
      if (!d_.tier->HasCommitted(ns, step)) {
        TC_RETURN_IF_ERROR(RestoreStep(ns, step));
        found.restored = true;
      }
    }
    // Again: the step restored here or by a repair, or committed again between the two looks.
    opened = d_.tier->OpenObject(ns, step, name);
  }
  if (!opened.ok() && opened.status().code() == Code::kNotFound) {
    return OpenFromOtherParts(ns, step, name, opened.status());
  }
  if (!opened.ok()) return opened.status();
  found.object = std::move(opened).value();
  return found;
}

Result<ReadPath::Found> ReadPath::OpenFromOtherParts(const std::string& ns, uint64_t step, const std::string& name,
                                                     const Status& not_here) {
  Result<Manifest> own = d_.tier->GetManifest(ns, step);
  if (!own.ok() || !own->SpansNodes()) return not_here;
  Result<PartObject> part = d_.cluster->OpenFromOtherParts(*own, name);
  if (part.ok()) return Found{std::move(part->object), part->copy, std::move(part->member), part->fetched};
  if (d_.store == nullptr) return part.status();
  Result<Found> durable = OpenFromDurablePart(*own, name);
  if (durable.ok()) {
    Log(LogLevel::kWarn, "part_from_durable")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("object", name)
        .Kv("origin", durable->member)
        .Kv("why", part.status().message());
    return durable;
  }
  // The members' answer leads (kNotFound: the object is in no part); the durable tier's follows.
  return Status(part.status().code(), part.status().message() + "; nor from the durable tier: " +
                                          durable.status().message());
}

Result<Manifest> ReadPath::DurableOfThisSave(const Manifest& own) {
  const std::string label = StepLabel(own.ns, own.step);
  const std::string where = d_.store->DescribeNamespace(own.ns);
  Result<Manifest> read = d_.store->ReadManifest(own.ns, own.step);
  if (!read.ok()) {
    if (read.status().code() == Code::kNotFound) return NotFound("no durable copy of " + label + " in " + where);
    return read.status().WithContext("reading the durable manifest of " + label);
  }
  // The durable copy must be this save of the step: it holds this node's part, byte for byte.
  if (std::string diff = PartDifference(*read, own); !diff.empty()) {
    return FailedPrecondition("the durable copy of " + label + " in " + where +
                              " is another save of that step number (" + diff + " from this node's part)");
  }
  return read;
}

Status ReadPath::RestorePartFromDurable(MemoryTier* copy, const Manifest& own, const std::string& member) {
  return copy->Restore(*d_.store, own.ns, own.step, member)
      .WithContext("restoring node " + member + "'s part of " + StepLabel(own.ns, own.step) + " from " +
                   d_.store->DescribeNamespace(own.ns));
}

Result<ReadPath::Found> ReadPath::OpenFromDurablePart(const Manifest& own, const std::string& name) {
  const std::string label = StepLabel(own.ns, own.step);
  const std::string where = d_.store->DescribeNamespace(own.ns);
  TC_ASSIGN_OR_RETURN(const Manifest durable, DurableOfThisSave(own));
  const ObjectEntry* wanted = durable.Find(name);
  if (wanted == nullptr) return NotFound("the durable copy of " + label + " in " + where + " has no object " + name);
  if (wanted->node.empty() || wanted->node == d_.node_id) {
    return Corruption("the durable copy of " + label + " in " + where + " places object " + name + " on node " +
                      (wanted->node.empty() ? std::string("(none)") : wanted->node) +
                      ", but this node's part lacks it; check the step with `tierckpt verify " + own.ns + " " +
                      std::to_string(own.step) + "`");
  }
  const std::string member = wanted->node;
  TC_ASSIGN_OR_RETURN(MemoryTier * copy, d_.cluster->PartCopy(member));
  TC_RETURN_IF_ERROR(RestorePartFromDurable(copy, own, member));
  Result<OpenedObject> opened = copy->OpenObject(own.ns, own.step, name);
  if (!opened.ok()) return opened.status().WithContext("opening " + label + "/" + name + " restored from " + where);
  return Found{std::move(opened).value(), copy, member, /*restored=*/true};
}

Status ReadPath::RestoreStep(const std::string& ns, uint64_t step, std::string* from) {
  const bool has_holders = !d_.cluster->holders().empty();
  Status from_peers = NotFound("no peers");
  if (has_holders) {
    Result<std::string> holder = d_.cluster->RestoreFromHolders(d_.tier, ns, step);
    if (holder.ok()) {
      if (from != nullptr) *from = "replica holder " + *holder;
      DurableOnlyIfPersisted(ns, step);
      return Status::Ok();
    }
    from_peers = holder.status();
    if (from_peers.code() == Code::kUnavailable) return from_peers;  // shutting down
    Log(LogLevel::kWarn, "peer_restore_failed")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("next", d_.cluster->HasParity() ? "parity" : (d_.store != nullptr ? "durable" : "none"))
        .Err(from_peers);
  }
  // No replica holder has it: rebuild it from the group's parity (decision
  // 139), unless more than M of the group's pieces are gone.
  Status from_parity = Status::Ok();
  if (d_.cluster->HasParity()) {
    Result<std::string> rebuilt = d_.cluster->RestoreFromParity(d_.tier, ns, step);
    if (rebuilt.ok()) {
      if (from != nullptr) *from = *rebuilt;
      DurableOnlyIfPersisted(ns, step);
      return Status::Ok();
    }
    from_parity = rebuilt.status();
    if (from_parity.code() == Code::kUnavailable) return from_parity;  // shutting down
    Log(LogLevel::kWarn, "parity_restore_failed")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("next", d_.store != nullptr ? "durable" : "none")
        .Err(from_parity);
  }
  if (d_.store == nullptr) {
    Status none = StepInNoTier(ns, step);
    std::string why;
    if (has_holders) why += "; no replica holder has it either (" + from_peers.message() + ")";
    if (!from_parity.ok()) why += "; nor can it be rebuilt from parity (" + from_parity.message() + ")";
    return Status(none.code(), none.message() + why);
  }
  TC_RETURN_IF_ERROR(d_.tier->Restore(*d_.store, ns, step));
  if (from != nullptr) *from = "the durable tier (" + d_.store->DescribeNamespace(ns) + ")";
  return Status::Ok();
}

void ReadPath::DurableOnlyIfPersisted(const std::string& ns, uint64_t step) {
  if (d_.store != nullptr) {
    Result<Manifest> own = d_.tier->GetManifest(ns, step);
    if (own.ok() && DurableOfThisSave(*own).ok()) return;
  }
  d_.tier->MarkNotDurable(ns, step);
}

Result<ServedObject> ReadPath::Repair(const std::string& ns, uint64_t step, const std::string& name) {
  RepairTurn turn(this, ns, step);
  TC_ASSIGN_OR_RETURN(Found found, OpenAnyTier(ns, step, name, /*turn_held=*/true));
  if (found.restored) return ServedObject{std::move(found.object), ""};  // verified on the way in
  Result<std::string> damage = Rehash(found.tier, ns, step, name);
  if (!damage.ok()) return damage.status().WithContext("re-hashing " + ObjectLabel(ns, step, name));
  if (damage->empty()) {
    // The copy is sound (a previous repair replaced it, or the client's
    // check was wrong): hand it out again; the client checks it once more.
    Log(LogLevel::kInfo, "repair_not_needed").Kv("ns", ns).Kv("step", step).Kv("object", name);
    return ServedObject{std::move(found.object), ""};
  }
  return Replace(ns, step, name, found, *damage);
}

std::string ReadPath::WhyNoOtherCopy(const std::string& ns, uint64_t step) {
  std::string why;
  if (!d_.cluster->holders().empty()) {
    Result<Manifest> m = d_.cluster->ManifestFromHolders(ns, step);
    if (m.ok()) return "";
    why = m.status().message();
  } else {
    why = "no replica holders (--replicas 1)";
  }
  // Another copy replaces the corrupt one only if it is of this save of the
  // step (the parity and the durable tier may hold an older save of the step
  // number: RestoreStep would bring that back instead).
  const Result<Manifest> own = d_.tier->GetManifest(ns, step);
  if (d_.cluster->HasParity()) {
    Result<Manifest> rebuilt = d_.cluster->ManifestFromParity(ns, step);
    if (own.ok() && rebuilt.ok()) {
      const std::string diff = PartDifference(*rebuilt, *own);
      if (diff.empty()) return "";
      why += "; its group's parity is of another save of that step number (" + diff + ")";
    } else {
      why += "; no parity to rebuild it from (" + (own.ok() ? rebuilt.status() : own.status()).message() + ")";
    }
  }
  if (d_.store == nullptr) return why + "; no durable copy (this agent has no durable tier)";
  Result<Manifest> m = d_.store->ReadManifest(ns, step);
  if (m.ok() && own.ok()) {
    const std::string diff = PartDifference(*m, *own);
    if (diff.empty()) return "";
    return why + "; the durable copy in " + d_.store->DescribeNamespace(ns) +
           " is another save of that step number (" + diff + ")";
  }
  if (m.ok()) return "";
  if (m.status().code() == Code::kNotFound)
    return why + "; no durable copy in " + d_.store->DescribeNamespace(ns);
  return why + "; no durable copy could be read (" + m.status().ToString() + ")";
}

Result<ServedObject> ReadPath::Replace(const std::string& ns, uint64_t step, const std::string& name,
                                       const Found& found, const std::string& damage) {
  const std::string label = StepLabel(ns, step);
  const bool own = found.member.empty();
  const std::string copy = own ? "the memory copy" : "this node's copy of node " + found.member + "'s part";
  const std::string corrupt =
      copy + " of object " + ObjectLabel(ns, step, name) + " is corrupt (it " + damage + ")";
  if (own) {
    if (std::string why = WhyNoOtherCopy(ns, step); !why.empty()) {
      return Corruption(corrupt + ", and no other tier holds " + label + " to restore it from: " + why +
                        "; rewrite the step, or delete it (`tierckpt rm " + ns + " " + std::to_string(step) +
                        "`)");
    }
  }
  Log(LogLevel::kWarn, "corrupt_copy_dropped")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("object", name)
      .Kv("part", own ? std::string("own") : found.member)
      .Kv("damage", damage);
  // A persist asked for and not done yet is asked again once the step is
  // back (the drop removes its marker with the step).
  Result<PersistStatus> persist = found.tier->WaitPersist(ns, step, std::chrono::milliseconds(0));
  const bool persist_pending = own && persist.ok() && persist->state != PersistState::kNone &&
                               persist->state != PersistState::kDurable;
  // This node's copy only: the holders' replicas are what it comes back from.
  Result<bool> dropped = found.tier->DeleteStep(ns, step);
  if (!dropped.ok()) return Corruption(corrupt + "; dropping it failed: " + dropped.status().ToString());
  std::string from;
  if (own) {
    Status st = RestoreStep(ns, step, &from);
    if (!st.ok())
      return Corruption(corrupt + "; it was dropped, but restoring " + label + " failed: " + st.ToString());
    if (persist_pending) {
      Status asked = d_.tier->RequestPersist(ns, step);
      if (!asked.ok()) {
        Log(LogLevel::kWarn, "persist_not_requested_again").Kv("ns", ns).Kv("step", step).Err(asked);
      }
    }
  } else {
    Status st = d_.cluster->FetchPart(found.tier, found.member, ns, step);
    from = "node " + found.member + " or a holder of its replicas";
    if (!st.ok() && d_.store != nullptr) {
      Result<Manifest> own_part = d_.tier->GetManifest(ns, step);
      Status durable = own_part.ok() ? DurableOfThisSave(*own_part).status() : own_part.status();
      if (durable.ok()) durable = RestorePartFromDurable(found.tier, *own_part, found.member);
      if (durable.ok()) from = "the durable tier (" + d_.store->DescribeNamespace(ns) + ")";
      st = durable.ok() ? durable : Status(st.code(), st.message() + "; from the durable tier: " + durable.message());
    }
    if (!st.ok())
      return Corruption(corrupt + "; it was dropped, but fetching the part again failed: " + st.ToString());
  }
  Result<OpenedObject> opened = found.tier->OpenObject(ns, step, name);
  if (!opened.ok())
    return opened.status().WithContext("opening " + ObjectLabel(ns, step, name) + " after its repair");
  Log(LogLevel::kInfo, "corrupt_copy_replaced")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("object", name)
      .Kv("from", from);
  return ServedObject{std::move(opened).value(),
                      corrupt + "; dropped it and read " + label + " from " + from};
}

}  // namespace tierckpt::agent
