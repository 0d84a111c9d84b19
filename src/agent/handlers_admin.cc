// Handlers: listings (List, Show, Stats, Verify) and administration
// (DeleteStep, Prune, Persist, WaitDurable, Restore).
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "agent/handlers.h"
#include "agent/reports.h"
#include "common/checksum.h"
#include "common/log.h"
#include "common/names.h"
#include "tier/parts.h"
#include "wire/protocol.h"

namespace tierckpt::agent {
namespace {

constexpr size_t kVerifyChunk = 8u << 20;
// Manifest reads in flight when `ls` lists steps only the durable tier holds: the listing of a
// namespace with hundreds of durable steps on S3 took one GET's latency per step, one after another
// (the S3 fault campaign's checks grew from 0.4 s to seconds per round).
constexpr int kListManifestReads = 8;

Status ValidateStepRef(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  return ValidateStep(step);
}

std::string MemoryState(const StepInfo& s) { return s.committed ? "committed" : "writing"; }

Status NoDurable(std::string_view what) {
  return FailedPrecondition(std::string(what) +
                            ": this agent has no durable tier; start tierckptd with --durable URL");
}

// Re-reads every object of a durable step and checks it against the
// durable manifest (and the memory manifest, when given).
TierVerdict VerifyDurable(ObjectStore& store, std::string_view ns, uint64_t step, const Manifest* memory) {
  TierVerdict v;
  Result<Manifest> m = store.ReadManifest(ns, step);
  if (!m.ok()) {
    if (m.status().code() == Code::kNotFound) return v;
    v.present = true;
    v.state = "damaged";
    v.errors.push_back(m.status().ToString());
    return v;
  }
  v.present = true;
  v.state = "committed";
  std::string buf(std::min<uint64_t>(kVerifyChunk, std::max<uint64_t>(1, m->TotalBytes())), '\0');
  for (const auto& e : m->objects) {
    ++v.objects_checked;
    Result<uint64_t> size = store.ObjectSize(ns, step, e.name);
    if (!size.ok()) {
      v.errors.push_back("durable object " + e.name + ": " + size.status().ToString());
      continue;
    }
    if (*size != e.size) {
      v.errors.push_back("durable object " + e.name + " holds " + std::to_string(*size) +
                         " bytes, the manifest says " + std::to_string(e.size));
      continue;
    }
    Hasher h;
    Status st;
    for (uint64_t off = 0; off < e.size && st.ok(); off += buf.size()) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), e.size - off));
      st = store.ReadObject(ns, step, e.name, off, buf.data(), n);
      if (st.ok()) h.Update(buf.data(), n);
    }
    if (!st.ok()) {
      v.errors.push_back("durable object " + e.name + ": " + st.ToString());
      continue;
    }
    std::string actual = h.Finish().ToString();
    if (actual != e.checksum) {
      v.errors.push_back("durable object " + e.name + " hashes to " + actual + " but the manifest says " +
                         e.checksum);
    }
  }
  if (memory != nullptr && memory->SpansNodes()) {
    // This node holds one part of the step; the durable manifest is every part's, merged: it must hold
    // this part's objects as they are in memory.
    if (std::string diff = PartDifference(*m, *memory); !diff.empty()) {
      v.errors.push_back("the durable manifest does not hold this node's part as the memory manifest does (" +
                         diff + ")");
    }
  } else if (memory != nullptr) {
    bool same = memory->objects.size() == m->objects.size();
    for (size_t i = 0; same && i < m->objects.size(); ++i) {
      same = memory->objects[i].name == m->objects[i].name && memory->objects[i].size == m->objects[i].size &&
             memory->objects[i].checksum == m->objects[i].checksum;
    }
    if (!same) v.errors.push_back("the durable manifest lists other objects or checksums than the memory manifest");
  }
  v.ok = v.errors.empty();
  return v;
}

}  // namespace

Reply Handlers::List(std::string_view p) {
  wire::ListRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (!req.ns.empty()) {
    if (Status st = ValidateNamespace(req.ns); !st.ok()) return StatusReply(st);
  }
  // Durable listing first: the durable column of memory steps is the store's
  // word when it answered, the persister's state otherwise.
  std::string durable_error;
  // The namespaces the store listed: their committed steps, each with its manifest's tag.
  std::map<std::string, std::map<uint64_t, std::string>> durable;
  if (req.include_durable && d_.store != nullptr) {
    std::vector<std::string> namespaces;
    if (req.ns.empty()) {
      Result<std::vector<std::string>> all = d_.store->ListNamespaces();
      if (all.ok()) {
        namespaces = std::move(all).value();
      } else {
        durable_error = all.status().ToString();
      }
    } else {
      namespaces.push_back(req.ns);
    }
    for (const auto& ns : namespaces) {
      Result<std::vector<CommittedStep>> steps = d_.store->ListCommittedStepsTagged(ns);
      if (!steps.ok()) {
        durable_error = steps.status().ToString();
        continue;
      }
      std::set<uint64_t> listed;
      // The namespace was listed even when it holds no committed step: its memory steps that said
      // "committed" were deleted from the durable tier since (an empty listing is an answer).
      std::map<uint64_t, std::string>& tags = durable[ns];
      for (CommittedStep& c : *steps) {
        listed.insert(c.step);
        tags.emplace(c.step, std::move(c.manifest_tag));
      }
      manifest_cache_.Retain(d_.store->DescribeNamespace(ns), ns, listed);
    }
  }
  std::map<std::pair<std::string, uint64_t>, ListEntry> rows;
  for (const StepInfo& s : d_.tier->ListSteps(req.ns)) {
    ListEntry& e = rows[{s.ns, s.step}];
    e.ns = s.ns;
    e.step = s.step;
    e.bytes = s.bytes;
    e.objects = s.objects;
    e.memory = MemoryState(s);
    if (!s.committed) continue;
    e.parity = d_.cluster->ParityStateOf(s.ns, s.step);
    e.durable = PersistStateName(s.persist);
    if (s.persist == PersistState::kFailed) e.durable_error = s.persist_error;
    auto listed = durable.find(s.ns);
    if (listed == durable.end() || e.durable == "pending") continue;
    if (listed->second.count(s.step) != 0) {
      e.durable = "committed";
      e.durable_error.clear();
    } else if (e.durable == "committed") {
      e.durable.clear();  // deleted from the durable tier since
    }
  }
  // Steps only the durable tier holds: their sizes are in their manifests, read once per manifest tag
  // (manifest_cache.h: an unchanged ETag is not read again; untagged stores read every time, a GET
  // each on S3 without ETags), kListManifestReads at a time.
  std::vector<ListEntry*> durable_only;
  std::vector<ListedDurableStep> to_summarize;
  for (const auto& [ns, steps] : durable) {
    for (const auto& [step, tag] : steps) {
      if (rows.count({ns, step}) != 0) continue;
      ListEntry& e = rows[{ns, step}];
      e.ns = ns;
      e.step = step;
      durable_only.push_back(&e);
      to_summarize.push_back({ns, CommittedStep{step, tag}});
    }
  }
  std::vector<Result<ManifestSummary>> summaries =
      ReadManifestSummaries(*d_.store, manifest_cache_, to_summarize, kListManifestReads);
  for (size_t i = 0; i < durable_only.size(); ++i) {
    ListEntry& e = *durable_only[i];
    if (summaries[i].ok()) {
      e.bytes = summaries[i]->bytes;
      e.objects = summaries[i]->objects;
      e.durable = "committed";
    } else {
      e.durable = "damaged";
      e.durable_error = summaries[i].status().ToString();
    }
  }
  if (!req.ns.empty() && !d_.cluster->holders().empty()) {
    // This node's steps that only replica holders keep (memory "peer").
    for (const auto& [step, holder] : d_.cluster->StepsOnHolders(req.ns)) {
      if (rows.count({req.ns, step}) != 0) {
        if (rows[{req.ns, step}].memory.empty()) rows[{req.ns, step}].memory = "peer";
        continue;
      }
      ListEntry& e = rows[{req.ns, step}];
      e.ns = req.ns;
      e.step = step;
      e.memory = "peer";
      if (Result<Manifest> m = d_.cluster->ManifestFromHolders(req.ns, step); m.ok()) {
        e.bytes = m->TotalBytes();
        e.objects = static_cast<uint32_t>(m->objects.size());
      }
    }
  }
  std::vector<ListEntry> out;
  out.reserve(rows.size());
  for (auto& [key, e] : rows) out.push_back(std::move(e));
  return JsonReply(ListJson(out, durable_error));
}

Reply Handlers::Show(std::string_view p) {
  wire::StepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (Status st = ValidateStepRef(req.ns, req.step); !st.ok()) return StatusReply(st);
  std::string memory, durable, durable_error;
  std::optional<Manifest> manifest;
  if (Result<Manifest> m = d_.tier->GetManifest(req.ns, req.step); m.ok()) {
    manifest = std::move(m).value();
    memory = "committed";
    for (const StepInfo& s : d_.tier->ListSteps(req.ns)) {
      if (s.step != req.step || !s.committed) continue;
      durable = PersistStateName(s.persist);
      durable_error = s.persist_error;
    }
  }
  if (d_.store != nullptr && durable != "pending") {
    Result<Manifest> m = d_.store->ReadManifest(req.ns, req.step);
    if (m.ok()) {
      durable = "committed";
      durable_error.clear();
      if (!manifest) manifest = std::move(m).value();
    } else if (m.status().code() != Code::kNotFound) {
      durable = "damaged";
      durable_error = m.status().ToString();
    } else if (durable == "committed") {
      durable.clear();  // deleted from the durable tier since
    }
  }
  std::string elsewhere;  // what the holders and the parity said when they had nothing
  if (!manifest && !d_.cluster->holders().empty()) {
    // Not here (a replacement node?): a replica holder may have it; reading
    // it restores it from there (OpenObject, Restore).
    Result<Manifest> m = d_.cluster->ManifestFromHolders(req.ns, req.step);
    if (m.ok()) {
      manifest = std::move(m).value();
      memory = "peer";
    } else {
      elsewhere += "; " + m.status().message();
    }
  }
  if (!manifest && d_.cluster->HasParity()) {
    // Nor a replica of it: the group's parity may describe it; reading it
    // rebuilds it from the group's survivors (OpenObject, RestoreStep).
    Result<Manifest> m = d_.cluster->ManifestFromParity(req.ns, req.step);
    if (!m.ok()) elsewhere += "; " + m.status().message();
    if (m.ok()) {
      manifest = std::move(m).value();
      memory = "parity";
    }
  }
  if (!manifest) {
    Status none = InNoTier(req.ns, req.step);
    return StatusReply(Status(none.code(), none.message() + elsewhere));
  }
  return JsonReply(ShowJson(*manifest, memory, durable, durable_error));
}

Reply Handlers::Stats(std::string_view p) {
  wire::Decoder dec(p);
  if (Status st = dec.Finish(); !st.ok()) return ProtocolReply(st.WithContext("Stats takes no payload"));
  StatsInput in;
  in.info = d_.info;
  in.tier = d_.tier->Stats();
  in.policies = d_.tier->policies().All();
  if (Result<MountSpace> m = MountSpaceOf(d_.info.root); m.ok()) in.mount = *m;
  std::map<std::string, NamespaceSummary> ns;
  for (const StepInfo& s : d_.tier->ListSteps("")) {
    NamespaceSummary& n = ns[s.ns];
    n.ns = s.ns;
    if (!s.committed) {
      ++n.writing_steps;
      continue;
    }
    n.memory_steps.push_back(s.step);
    n.memory_bytes += s.bytes;
    if (s.persist == PersistState::kFailed) in.not_persisted.push_back({s.ns, s.step, s.persist_error});
    n.memory_newest = std::max(n.memory_newest.value_or(0), s.step);
  }
  if (d_.store != nullptr) {
    Result<std::vector<std::string>> names = d_.store->ListNamespaces();
    if (!names.ok()) {
      in.durable_error = names.status().ToString();
    } else {
      for (const auto& name : *names) {
        Result<std::vector<uint64_t>> steps = d_.store->ListCommittedSteps(name);
        if (!steps.ok()) {
          in.durable_error = steps.status().ToString();
          continue;
        }
        if (steps->empty()) continue;
        NamespaceSummary& n = ns[name];
        n.ns = name;
        n.durable_newest = steps->back();
      }
    }
  }
  if (d_.bases != nullptr) {
    for (const auto& [name, url] : d_.bases->Bindings()) {
      NamespaceSummary& n = ns[name];
      n.ns = name;
      n.durable_base = url;
    }
  }
  for (auto& [name, n] : ns) in.namespaces.push_back(std::move(n));
  in.peers = d_.cluster->Stats();
  if (d_.persister != nullptr) {
    in.persist_queued = d_.persister->queued();
    in.persist_running = d_.persister->running();
    in.persist_awaiting_parts = d_.persister->awaiting_parts();
  }
  in.connections = d_.connection_count ? d_.connection_count() : 0;
  if (d_.scrub_counters) in.scrub = d_.scrub_counters();
  in.last_errors = d_.errors->Snapshot();
  return JsonReply(StatsJson(in));
}

Reply Handlers::Verify(std::string_view p) {
  wire::StepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (Status st = ValidateStepRef(req.ns, req.step); !st.ok()) return StatusReply(st);
  TierVerdict memory;
  std::optional<Manifest> memory_manifest;
  Result<MemoryVerifyResult> mv = d_.tier->VerifyStep(req.ns, req.step);
  if (mv.ok()) {
    memory.present = true;
    memory.state = "committed";
    memory.objects_checked = mv->objects_checked;
    memory.errors = std::move(mv->errors);
    memory.ok = memory.errors.empty();
    memory_manifest = std::move(mv->manifest);
  } else if (mv.status().code() != Code::kNotFound) {
    return StatusReply(mv.status());
  }
  TierVerdict durable;
  if (d_.store != nullptr) {
    durable = VerifyDurable(*d_.store, req.ns, req.step, memory_manifest ? &*memory_manifest : nullptr);
    if (!durable.present && memory.present && RecordedDurable(req.ns, req.step)) {
      // The agent made it durable, and it is gone from there: say so (the
      // memory copy may be the last one) rather than report a step that
      // simply never was persisted.
      durable.present = true;
      durable.state = "missing";
      durable.errors.push_back(
          "the agent persisted " + StepLabel(req.ns, req.step) + " to " +
          d_.store->DescribeNamespace(req.ns) +
          " but its manifest is not there any more (deleted outside tierckpt?); `tierckpt "
          "persist " +
          req.ns + " " + std::to_string(req.step) + " --wait` writes it again from memory");
    }
  }
  Log(LogLevel::kInfo, "verify")
      .Kv("ns", req.ns)
      .Kv("step", req.step)
      .Kv("memory", memory.present ? (memory.ok ? "ok" : "MISMATCH") : "absent")
      .Kv("durable", durable.present ? (durable.ok ? "ok" : "MISMATCH") : "absent");
  return JsonReply(VerifyJson(req.ns, req.step, memory, durable));
}

bool Handlers::RecordedDurable(const std::string& ns, uint64_t step) const {
  for (const StepInfo& s : d_.tier->ListSteps(ns)) {
    if (s.step == step && s.committed) return s.persist == PersistState::kDurable;
  }
  return false;
}

Reply Handlers::DeleteStep(std::string_view p) {
  wire::DeleteStepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (Status st = ValidateStepRef(req.ns, req.step); !st.ok()) return StatusReply(st);
  const std::string label = StepLabel(req.ns, req.step);
  if (req.durable_too && d_.store == nullptr) return StatusReply(NoDurable("cannot delete " + label + " durably"));
  // A part of a step spanning nodes parked until the others' parts are durable (decision 152) is
  // being persisted as far as the tier knows: its wait ends first, so that a part whose step
  // will never be whole (its coordinator failed it) can be deleted by hand.
  if (d_.persister != nullptr) d_.persister->CancelAwaitingParts(req.ns, req.step);
  Result<bool> mem = d_.tier->DeleteStep(req.ns, req.step);
  if (!mem.ok()) return StatusReply(mem.status());
  std::vector<DeletedStep> deleted;
  if (*mem) deleted.push_back({req.ns, req.step, "memory"});
  if (req.durable_too) {
    Result<bool> there = DurableHas(req.ns, req.step);
    Status st = d_.store->DeleteStep(req.ns, req.step);
    if (!st.ok())
      return StatusReply(
          st.WithContext("deleting " + label + " from " + d_.store->DescribeNamespace(req.ns)));
    if (!there.ok() || *there) deleted.push_back({req.ns, req.step, "durable"});
  }
  Log(LogLevel::kInfo, "delete").Kv("ns", req.ns).Kv("step", req.step).Kv("memory", *mem).Kv("durable", req.durable_too);
  // The holders' copies go too, or a replacement node would bring the step
  // back from them. Asked even when memory no longer had it: a delete that
  // failed there is completed by running it again.
  if (!req.keep_replicas) {
    Result<std::vector<std::string>> dropped = d_.cluster->DropReplicas(req.ns, req.step);
    if (!dropped.ok()) {
      d_.errors->Add("delete", dropped.status());
      return StatusReply(dropped.status().WithContext(
          "deleted " + label + " from " + (req.durable_too ? "memory and the durable tier" : "memory")));
    }
    for (const std::string& holder : *dropped) deleted.push_back({req.ns, req.step, "replica@" + holder});
  }
  return JsonReply(DeletedJson(deleted));
}

Reply Handlers::Prune(std::string_view p) {
  wire::PruneRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (!req.ns.empty()) {
    if (Status st = ValidateNamespace(req.ns); !st.ok()) return StatusReply(st);
  }
  if (req.keep_durable > 0 && d_.store == nullptr) return StatusReply(NoDurable("cannot prune the durable tier"));
  PruneReport report;
  report.keep_memory = req.keep_memory == 0 ? d_.info.keep_last : req.keep_memory;
  report.keep_durable = req.keep_durable;
  const bool check_here = d_.store != nullptr;
  PruneResult memory = d_.tier->Prune(req.ns, report.keep_memory, check_here);
  if (!memory.rechecking.empty() && check_here) {
    // Steps recorded durable go once their durable copy is seen: checked
    // here (an admin request may wait for the store) rather than by the
    // persister, so that the prune's answer says what it deleted. A durable
    // copy that is gone is written again first (kept until it is).
    for (const auto& [ns, step] : memory.rechecking) {
      Result<Manifest> there = d_.store->ReadManifest(ns, step);
      Result<Manifest> here = d_.tier->GetManifest(ns, step);
      if (there.ok() && here.ok() && SameObjects(*there, *here)) {
        d_.tier->ConfirmDurable(ns, step);
      } else if (here.ok()) {
        (void)d_.tier->RequestPersist(ns, step);
      }
    }
    PruneResult again = d_.tier->Prune(req.ns, report.keep_memory, check_here);
    for (auto& e : again.evicted) memory.evicted.push_back(std::move(e));
    memory.kept_pending = std::move(again.kept_pending);
  }
  for (const auto& [ns, step] : memory.evicted) report.deleted.push_back({ns, step, "memory"});
  report.kept_pending = std::move(memory.kept_pending);
  if (req.keep_durable > 0) {
    std::vector<std::string> namespaces;
    if (req.ns.empty()) {
      Result<std::vector<std::string>> all = d_.store->ListNamespaces();
      if (!all.ok()) return StatusReply(all.status().WithContext("listing " + d_.store->Describe()));
      namespaces = std::move(all).value();
    } else {
      namespaces.push_back(req.ns);
    }
    for (const auto& ns : namespaces) {
      Result<std::vector<uint64_t>> steps = d_.store->ListCommittedSteps(ns);
      if (!steps.ok()) {
        report.errors.push_back(steps.status().ToString());
        continue;
      }
      for (size_t i = 0; i + req.keep_durable < steps->size(); ++i) {
        Status st = d_.store->DeleteStep(ns, (*steps)[i]);
        if (st.ok()) d_.tier->MarkNotDurable(ns, (*steps)[i]);
        if (st.ok()) {
          report.deleted.push_back({ns, (*steps)[i], "durable"});
        } else {
          report.errors.push_back(st.ToString());
        }
      }
    }
  }
  Log(LogLevel::kInfo, "prune")
      .Kv("ns", req.ns)
      .Kv("deleted", static_cast<uint64_t>(report.deleted.size()))
      .Kv("kept_pending", static_cast<uint64_t>(report.kept_pending.size()));
  return JsonReply(PruneJson(report));
}

Reply Handlers::Persist(std::string_view p) {
  wire::StepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (Status st = ValidateStepRef(req.ns, req.step); !st.ok()) return StatusReply(st);
  if (d_.store == nullptr) return StatusReply(NoDurable("cannot persist " + StepLabel(req.ns, req.step)));
  Status st = d_.tier->RequestPersist(req.ns, req.step);
  if (st.code() != Code::kNotFound) return StatusReply(st);
  Result<bool> durable = DurableHas(req.ns, req.step);
  if (!durable.ok()) return StatusReply(durable.status());
  return StatusReply(*durable ? Status::Ok() : InNoTier(req.ns, req.step));
}

Reply Handlers::WaitDurable(std::string_view p) {
  wire::WaitDurableRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (Status st = ValidateStepRef(req.ns, req.step); !st.ok()) return StatusReply(st);
  const std::string label = StepLabel(req.ns, req.step);
  if (d_.store == nullptr) return StatusReply(NoDurable("cannot wait for " + label + " to become durable"));
  std::optional<std::chrono::milliseconds> timeout;
  if (req.timeout_ms > 0) timeout = std::chrono::milliseconds(req.timeout_ms);
  Result<PersistStatus> w = d_.tier->WaitPersist(req.ns, req.step, timeout);
  if (!w.ok() && w.status().code() != Code::kNotFound) return StatusReply(w.status());
  if (w.ok()) {
    switch (w->state) {
      case PersistState::kDurable:
        return StatusReply(Status::Ok());
      case PersistState::kFailed:
        return StatusReply(w->error);
      case PersistState::kQueued:
      case PersistState::kRunning:
        return StatusReply(Timeout(label + " is not durable after " + std::to_string(req.timeout_ms) +
                                   " ms; persistence is still " +
                                   (w->state == PersistState::kQueued ? "queued" : "running") +
                                   "; wait longer or check `tierckpt agent status`"));
      case PersistState::kNone:
        break;
    }
  }
  Result<bool> durable = DurableHas(req.ns, req.step);
  if (!durable.ok()) return StatusReply(durable.status());
  if (*durable) {
    d_.tier->MarkDurable(req.ns, req.step);
    return StatusReply(Status::Ok());
  }
  if (!w.ok()) return StatusReply(InNoTier(req.ns, req.step));
  return StatusReply(FailedPrecondition("persistence of " + label +
                                        " was never requested; call Persist or commit with persist=true"));
}

Reply Handlers::Restore(std::string_view p) {
  wire::StepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (Status st = ValidateStepRef(req.ns, req.step); !st.ok()) return StatusReply(st);
  if (d_.tier->HasCommitted(req.ns, req.step)) return StatusReply(Status::Ok());
  return StatusReply(RestoreFromOtherTiers(req.ns, req.step));
}

}  // namespace tierckpt::agent
