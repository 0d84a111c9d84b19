#include "agent/agent.h"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "agent/peer_discovery.h"
#include "cluster/dns_peers.h"
#include "cluster/peer_source.h"
#include "common/checksum.h"
#include "common/log.h"
#include "os/files.h"
#include "os/fs_stat.h"
#include "os/mounts.h"
#include "peer/channel_transport.h"
#include "peer/secret_file.h"
#include "replication/commit.h"
#include "replication/multi_node.h"
#include "tier/budget.h"
#include "tier/layout.h"

namespace tierckpt::agent {
namespace {

// "uid 1001 (tcfoe)", or "uid 1001" when the user has no name here.
std::string UidLabel(uid_t uid) {
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  std::string label = "uid " + std::to_string(uid);
  if (::getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != nullptr) {
    label += " (" + std::string(pw.pw_name) + ")";
  }
  return label;
}

// Logs a warning when users other than root and us can replace --root in
// its parent (a rename there outruns any check made here).
void WarnIfParentIsShared(const std::string& root) {
  const std::string parent = DirName(root);
  Result<FileStat> st = StatFile(parent, Follow::kYes, IfMissing::kFail);
  if (!st.ok()) return;
  bool others_write = (st->mode & (S_IWGRP | S_IWOTH)) != 0 && (st->mode & S_ISVTX) == 0;
  bool foreign = st->uid != 0 && st->uid != ::geteuid();
  if (!others_write && !foreign) return;
  Log(LogLevel::kWarn, "root_safety")
      .Kv("root", root)
      .Kv("parent", parent)
      .Kv("parent_owner", UidLabel(st->uid))
      .Kv("why",
          "other users can rename or replace --root in its parent while tierckptd runs; choose a --root in a "
          "directory only root and this user can write, or one with the sticky bit (like /dev/shm)");
}

// A persist takeover's last resort (decision 159): the member that owes a
// part of a step spanning nodes, and every holder of its replicas, could not
// upload it (`elsewhere` says why); this node rebuilds the part from the
// member's group's parity into its copy of that member's parts and uploads
// it as the member's part. Returns who uploaded it, for the log.
Result<std::string> UploadRebuiltPart(Cluster* cluster, Persister* persister, const std::string& member,
                                      const std::string& ns, uint64_t step, const Status& elsewhere) {
  auto failed = [&](const Status& why) {
    return Status(elsewhere.code(),
                  elsewhere.message() + "; nor could this node rebuild the part from parity: " + why.message());
  };
  Result<MemoryTier*> copy = cluster->PartCopy(member);
  if (!copy.ok()) return failed(copy.status());
  Result<std::string> rebuilt = cluster->RebuildPartOf(*copy, member, ns, step);
  if (!rebuilt.ok()) return failed(rebuilt.status());
  if (Status uploaded = persister->UploadPart(*copy, ns, step); !uploaded.ok()) return failed(uploaded);
  return "this node, from " + *rebuilt;
}

}  // namespace

Agent::Agent(AgentConfig config) : config_(std::move(config)) {}

Agent::~Agent() {
  StopPreallocating();
  if (scrubber_ != nullptr) scrubber_->Stop();
  if (metrics_server_ != nullptr) metrics_server_->Stop();
  if (http_api_ != nullptr) http_api_->Stop();
  if (service_ != nullptr) service_->Stop();
  StopPeers();
  if (persister_ != nullptr) persister_->Stop(std::chrono::milliseconds(0));
  if (verifier_ != nullptr) verifier_->Stop();
}

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case Code::kInvalidArgument:
    case Code::kResourceExhausted:
    case Code::kAlreadyExists:
    case Code::kPermissionDenied:
      return 2;
    default:
      return 1;
  }
}

Status Agent::PrepareRoot() {
  // "link/" would resolve the link: the root's last component is judged as named.
  std::string root = config_.root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  // The parents are the operator's choice and may be links (/dev/shm ->
  // /run/shm); the root itself must be a real directory of ours, looked at
  // without following a link (docs/agent.md, "Root directory safety").
  TC_RETURN_IF_ERROR(
      MakeDirs(DirName(root), 0700).WithContext("creating the parent directory of --root " + root));
  TC_RETURN_IF_ERROR(MakeDir(root, 0700, "creating --root"));  // ok when something is there: judged below
  TC_ASSIGN_OR_RETURN(FileStat lst, StatFile(root, Follow::kNo, IfMissing::kFail, "stat --root"));
  if (lst.type == EntryType::kSymlink) {
    Result<std::string> link = ReadLink(root);
    const std::string target = link.ok() ? *link : "?";
    return PermissionDenied("--root " + root + " is a symbolic link (to " + target + ", the link owned by " +
                            UidLabel(lst.uid) +
                            "); tierckptd never uses a linked root: whoever made the link would choose which "
                            "directory it restricts to mode 0700, cleans and writes. Remove the link (rm " +
                            root + ") or choose another --root");
  }
  if (lst.type != EntryType::kDirectory) {
    return AlreadyExists("--root " + root +
                         " exists and is not a directory; remove it or choose another --root");
  }
  Result<UniqueFd> fd = OpenDirNoFollow(root);
  if (!fd.ok()) return fd.status().WithContext("opening --root " + root);
  TC_ASSIGN_OR_RETURN(FileStat st, StatOpenFd(fd->get(), "stat --root " + root));
  if (st.uid != ::geteuid()) {
    return PermissionDenied(
        "--root " + root + " belongs to " + UidLabel(st.uid) + ", not to " + UidLabel(::geteuid()) +
        " running tierckptd; tierckptd never adopts another user's directory (whoever made "
        "it could read, replace or plant links in the checkpoints). Remove it (as root or "
        "its owner) or choose another --root");
  }
  // fchmod on the fd just checked: never the target of a link put in its place.
  if (st.mode != 0700) {
    TC_RETURN_IF_ERROR(ChmodFd(fd->get(), 0700, "restricting --root " + root + " to mode 0700"));
  }
  WarnIfParentIsShared(root);
  return Status::Ok();
}

Status Agent::TakeLock() {
  const std::string name(kLockFileName);
  const std::string path = JoinPath(config_.root, name);
  Result<UniqueFd> root = OpenDirNoFollow(config_.root);
  if (!root.ok()) return root.status().WithContext("opening --root " + config_.root + " to lock it");
  FileLock lock;
  for (int attempt = 0; !lock.valid(); ++attempt) {
    // FileLock::Open never truncates through a link planted as the lock
    // file, nor hangs on a FIFO there: it reports them (kFailedPrecondition).
    Result<FileLock> opened = FileLock::Open(root->get(), name, path);
    if (opened.ok()) {
      lock = std::move(opened).value();
      break;
    }
    if (opened.status().code() != Code::kFailedPrecondition) return opened.status();
    if (attempt > 0) return FailedPrecondition(path + " is not a regular file; remove it and start again");
    RemovePlantedEntry(root->get(), name, path, "the agent's lock file").IgnoreError();
  }
  TC_ASSIGN_OR_RETURN(bool locked, lock.TryLockExclusive());
  if (!locked) {
    std::string owner = "unknown";
    char buf[32] = {};
    if (::pread(lock.fd(), buf, sizeof(buf) - 1, 0) > 0)
      owner = std::to_string(std::strtoll(buf, nullptr, 10));
    return AlreadyExists("another tierckptd (pid " + owner + ") owns " + config_.root +
                         "; stop it (`tierckpt agent stop`) or give this one another --root");
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  TC_RETURN_IF_ERROR(TruncateFd(lock.fd(), 0, "truncating " + path));
  TC_RETURN_IF_ERROR(PwriteAll(lock.fd(), pid.data(), pid.size(), 0, path));
  lock_ = std::move(lock);
  return Status::Ok();
}

Status Agent::OpenDurable(const std::string& bases_file) {
  Result<std::unique_ptr<ObjectStore>> opened = OpenObjectStore(config_.durable_url);
  if (!opened.ok()) return opened.status().WithContext("opening --durable " + config_.durable_url);
  std::shared_ptr<ObjectStore> default_store = std::move(opened).value();
  char cwd[4096];
  const std::string here = ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "/";
  TC_ASSIGN_OR_RETURN(DurableBase default_base, CanonicalDurableBase(config_.durable_url, here));
  TC_ASSIGN_OR_RETURN(DurableAllowList allow, DurableAllowList::Parse(config_.durable_allow));
  auto opener = [](const std::string& url) { return OpenObjectStore(url); };
  TC_ASSIGN_OR_RETURN(bases_, DurableBases::Open(bases_file, std::move(default_store),
                                                 std::move(default_base), std::move(allow), opener));
  store_ = std::make_unique<RoutedStore>(bases_.get());
  return Status::Ok();
}

Status Agent::Start(bool handle_signals) {
  TC_ASSIGN_OR_RETURN(LogLevel level, ParseLogLevel(config_.log_level));
  SetLogLevel(level);
  TC_RETURN_IF_ERROR(SetLogFile(config_.log_file).WithContext("--log-file"));
  if (handle_signals) {
    ::signal(SIGPIPE, SIG_IGN);
    // Blocked before any thread starts, so every thread inherits the mask and
    // the signals arrive only through the signalfd.
    Result<SignalFd> signals = SignalFd::Open({SIGINT, SIGTERM}, "SIGINT/SIGTERM");
    if (!signals.ok()) return signals.status();
    signal_fd_ = std::move(signals).value();
  }
  TC_RETURN_IF_ERROR(PrepareRoot());
  TC_RETURN_IF_ERROR(TakeLock());

  uint64_t ours = 0;  // bytes our object files already hold (they count toward free space)
  {
    Layout layout(config_.root);
    for (const std::string& dir : {layout.NamespacesDir(), layout.PoolDir(), layout.TrashDir()}) {
      TC_ASSIGN_OR_RETURN(uint64_t bytes, AllocatedBytesUnder(dir));
      ours += bytes;
    }
  }
  TC_ASSIGN_OR_RETURN(MountSpace space, MountSpaceOf(config_.root));
  TC_RETURN_IF_ERROR(CheckBudgetFits(config_.root, config_.budget_bytes, space, ours));

  const std::string bases_file = JoinPath(config_.root, std::string(kDurableBasesFileName));
  if (!config_.durable_url.empty()) {
    TC_RETURN_IF_ERROR(OpenDurable(bases_file));
  } else if (Result<FileInfo> bound = StatPath(bases_file); bound.ok() && bound->exists) {
    Log(LogLevel::kWarn, "durable bases")
        .Kv("file", bases_file)
        .Kv("error", "this agent has no --durable: the namespaces bound there are not persisted");
  }
  const ThreadPriority background = config_.background_priority_value;
  // The verify threads keep normal priority: a commit waits for the hashes
  // of objects sealed without a checksum (the PyTorch writer's), so they are
  // on the save's path (bench/interference.py: at idle, commits took 8x longer).
  verifier_ = std::make_unique<WorkQueue>("verify", config_.verify_threads);
  MemoryTierOptions mo;
  mo.root = config_.root;
  mo.budget_bytes = config_.budget_bytes;
  mo.keep_last = config_.keep_last;
  mo.persist_every = config_.persist_every;
  mo.has_durable = store_ != nullptr;
  mo.verify_on_seal = config_.verify_on_seal;
  mo.commit_before_hash = config_.commit_before_hash;
  mo.node_id = config_.node_id;
  mo.metrics = &metrics_;
  tier_ = std::make_unique<MemoryTier>(mo, verifier_.get());
  if (store_ != nullptr) {
    PersisterOptions po;
    po.threads = config_.persist_threads;
    po.durable_keep = config_.durable_keep;
    po.metrics = &metrics_;
    po.rate = &persist_rate_;
    po.priority = background;
    persister_ = std::make_unique<Persister>(po, tier_.get(), store_.get(), &errors_);
    Persister* p = persister_.get();
    tier_->SetPersistHook([p](const std::string& ns, uint64_t step) { p->Enqueue(ns, step); });
  }
  TC_ASSIGN_OR_RETURN(RecoveryReport report, tier_->Recover());
  for (const Status& e : report.errors) errors_.Add("recovery", e);
  if (!config_.peers_file.empty()) TC_RETURN_IF_ERROR(StartPeers(mo));
  // After StartPeers: a step spanning nodes needs the persister's parts options.
  if (persister_ != nullptr) {
    for (const auto& [ns, step] : report.persist_pending) persister_->Enqueue(ns, step);
  }
  if (config_.preallocate_bytes > 0) {
    MemoryTier* tier = tier_.get();
    const uint64_t bytes = config_.preallocate_bytes, segment = config_.preallocate_segment_bytes;
    RecentErrors* errors = &errors_;
    preallocator_ = std::thread([tier, bytes, segment, errors, background] {
      LowerThisThreadForBackgroundWork(background, "preallocate");
      Result<uint64_t> added = tier->Preallocate(bytes, segment);
      if (!added.ok()) errors->Add("preallocate", added.status());
    });
  }

  HandlerDeps deps;
  deps.info.node_id = config_.node_id;
  deps.info.root = config_.root;
  deps.info.durable_url = store_ != nullptr ? store_->Describe() : "";
  deps.info.durable_allow = config_.durable_allow;
  deps.info.socket_path = config_.socket_path;
  deps.info.pid = ::getpid();
  deps.info.started_unix_ms = NowUnixMs();
  deps.info.keep_last = config_.keep_last;
  deps.info.persist_every = config_.persist_every;
  deps.info.durable_keep = config_.durable_keep;
  deps.info.verify_on_seal = config_.verify_on_seal;
  deps.info.commit_before_hash = config_.commit_before_hash;
  deps.info.persist_rate_bytes = config_.persist_rate_bytes;
  deps.info.replicate_rate_bytes = config_.replicate_rate_bytes;
  deps.info.background_priority = std::string(ThreadPriorityName(background));
  deps.info.scrub_interval_ms = config_.scrub_interval_ms;
  if (Result<MountOfPath> mount = FindMount(config_.root); mount.ok()) {
    deps.info.tmpfs_huge_pages = TmpfsHugePages(*mount);
  } else {
    Log(LogLevel::kWarn, "mounts").Kv("root", config_.root).Err(mount.status());
  }
  tmpfs_huge_pages_ = deps.info.tmpfs_huge_pages;
  deps.tier = tier_.get();
  deps.persister = persister_.get();
  deps.store = store_.get();
  deps.bases = bases_.get();
  deps.errors = &errors_;
  deps.connection_count = [this] { return service_ != nullptr ? service_->connections() : 0; };
  deps.scrub_counters = [this] { return scrubber_ != nullptr ? scrubber_->counters() : ScrubCounters{}; };
  deps.cluster = cluster_.get();
  handlers_ = std::make_unique<Handlers>(std::move(deps));
  ScrubberOptions scrub;
  scrub.interval = std::chrono::milliseconds(config_.scrub_interval_ms);
  scrub.priority = background;
  scrubber_ = std::make_unique<Scrubber>(
      scrub, ScrubberDeps{tier_.get(), handlers_->read_path(), &errors_, &metrics_, replicas_.get(), parity_holder_.get()});
  scrubber_->Start();
  if (!config_.metrics_listen.empty()) {
    metrics_server_ = std::make_unique<MetricsServer>(&metrics_, [this] { return Gauges(); });
    TC_RETURN_IF_ERROR(metrics_server_->Start(config_.metrics_listen));
  }
  if (!config_.http_listen.empty()) {
    HttpApiDeps hd{tier_.get(), handlers_->read_path(), cluster_.get(), config_.root};
    HttpApiOptions ho;
    TC_ASSIGN_OR_RETURN(ho.allow, AllowList::Parse(config_.http_allow));
    ho.hosts = config_.http_hosts;
    ho.max_shard_bytes = config_.budget_bytes;
    TC_ASSIGN_OR_RETURN(http_api_, HttpApi::Create(hd, std::move(ho)));
    TC_RETURN_IF_ERROR(http_api_->Start(config_.http_listen));
  }
  ServiceOptions so;
  so.socket_path = config_.socket_path;
  service_ = std::make_unique<Service>(so, handlers_.get());
  TC_RETURN_IF_ERROR(PrepareSocketDir(config_.socket_path));
  TC_RETURN_IF_ERROR(service_->Listen());
  if (!config_.pid_file.empty()) {
    std::string pid = std::to_string(::getpid()) + "\n";
    TC_RETURN_IF_ERROR(WriteFileAtomic(config_.pid_file, pid, false).WithContext("--pid-file"));
  }
  const std::optional<PeerStatsInput> peers = cluster_->Stats();
  Log(LogLevel::kInfo, "ready")
      .Kv("socket", config_.socket_path)
      .Kv("root", config_.root)
      .Kv("budget", FormatBytes(config_.budget_bytes))
      .Kv("budget_bytes", config_.budget_bytes)
      .Kv("durable", store_ != nullptr ? store_->Describe() : "none")
      .Kv("durable_allow", config_.durable_allow.empty() ? "none" : JoinIds(config_.durable_allow, ","))
      .Kv("node", config_.node_id)
      .Kv("keep_last", config_.keep_last)
      .Kv("peers", peers ? peers->listen : "none")
      .Kv("metrics", metrics_server_ != nullptr ? metrics_server_->address() : "off")
      .Kv("http", http_api_ != nullptr ? http_api_->address() : "off")
      .Kv("replica_holders", JoinIds(cluster_->holders(), ","))
      .Kv("persist_rate",
          config_.persist_rate_bytes == 0 ? "unlimited" : FormatBytes(config_.persist_rate_bytes) + "/s")
      .Kv("replicate_rate",
          config_.replicate_rate_bytes == 0 ? "unlimited" : FormatBytes(config_.replicate_rate_bytes) + "/s")
      .Kv("background_priority", ThreadPriorityName(background))
      .Kv("checksum_kernel", ChecksumKernel())
      .Kv("scrub_interval_ms", config_.scrub_interval_ms)
      .Kv("tmpfs_huge_pages",
          tmpfs_huge_pages_.empty() ? "none (the root is not on a tmpfs)" : tmpfs_huge_pages_)
      .Kv("recovered_steps", static_cast<uint64_t>(report.committed_steps))
      .Kv("recovered_bytes", report.bytes)
      .Kv("pid", static_cast<int64_t>(::getpid()));
  return Status::Ok();
}

void Agent::Run() {
  if (service_ == nullptr) return;
  service_->Run(signal_fd_.fd(), [this] {
    tier_->Shutdown();
    cluster_->Shutdown();
  });
  if (http_api_ != nullptr) http_api_->Stop();  // its uploads in progress end (the tier refuses them)
  scrubber_->Stop();
  StopPeers();
  StopPreallocating();
  if (std::optional<int> sig = signal_fd_.ReadSignal(); sig.has_value()) {
    Log(LogLevel::kInfo, "signal").Kv("signal", static_cast<uint64_t>(*sig)).Kv("action", "shutdown");
  }
  Log(LogLevel::kInfo, "stopping").Kv("grace_s", config_.shutdown_grace_s);
  if (persister_ != nullptr) persister_->Stop(std::chrono::seconds(config_.shutdown_grace_s));
  verifier_->Stop();
  // Best effort: a stale pid file names no live process, and the next start rewrites it.
  if (!config_.pid_file.empty()) RemoveFile(config_.pid_file, IfMissing::kOk).IgnoreError();
  Log(LogLevel::kInfo, "stopped").Kv("pid", static_cast<int64_t>(::getpid()));
}

Result<cluster::Membership> Agent::DiscoverDnsPeers(const cluster::DnsPeersSpec& spec, peer::Millis timeout) {
  // The listener comes first: the other agents learn this one's node id from
  // its handshake while each of them discovers, as this one learns theirs.
  // What they open meanwhile waits in the listener's queue for the peer
  // service (PeerService::Start(listener)).
  Result<std::unique_ptr<peer::Listener>> l = transport_->Listen(config_.peer_listen);
  if (!l.ok()) return l.status().WithContext("listening for peers at " + config_.peer_listen + " (--peer-listen)");
  early_listener_ = std::move(l).value();
  cluster::DnsDiscoveryOptions o;
  o.expect = config_.peers_count;
  o.wait = std::chrono::seconds(config_.peers_wait_s);
  Log(LogLevel::kInfo, "peers_discovering")
      .Kv("name", spec.name)
      .Kv("port", static_cast<uint64_t>(spec.port))
      .Kv("expect", static_cast<uint64_t>(config_.peers_count))
      .Kv("wait_s", config_.peers_wait_s);
  std::unique_ptr<cluster::HostResolver> resolver = cluster::NewSystemResolver();
  // A probe needs no more than a handshake, which an agent answers in milliseconds.
  const peer::Millis probe_timeout = std::min(timeout, peer::Millis(2000));
  Result<cluster::Membership> members = cluster::DiscoverDnsPeers(
      spec, config_.node_id, *resolver, HandshakeProbe(transport_.get(), probe_timeout), o);
  if (members.ok()) {
    std::string found;
    for (const cluster::Member& m : members->members()) {
      found += (found.empty() ? "" : ",") + m.node_id + "@" + m.address;
    }
    Log(LogLevel::kInfo, "peers_found").Kv("name", spec.name).Kv("members", found);
  }
  return members;
}

Status Agent::StartPeers(const MemoryTierOptions& tier_options) {
  TC_ASSIGN_OR_RETURN(peer::ClusterSecret secret, peer::LoadSecretFile(config_.peer_secret_file, ::geteuid()));
  peer::TransportOptions to;
  to.node_id = config_.node_id;
  to.secret = std::move(secret);
  TC_ASSIGN_OR_RETURN(std::unique_ptr<peer::TcpTransport> tcp, peer::TcpTransport::Create(std::move(to)));
  transport_ = std::move(tcp);
  const peer::Millis timeout(config_.peer_timeout_ms);

  std::optional<cluster::DnsPeersSpec> dns;
  cluster::Membership members;
  if (cluster::IsDnsPeers(config_.peers_file)) {
    TC_ASSIGN_OR_RETURN(dns, cluster::ParseDnsPeers(config_.peers_file));
    TC_ASSIGN_OR_RETURN(members, DiscoverDnsPeers(*dns, timeout));
  } else {
    TC_ASSIGN_OR_RETURN(members, cluster::LoadPeers(config_.peers_file));
  }
  const cluster::Member* self = members.Find(config_.node_id);
  if (self == nullptr) {
    return InvalidArgument("--node-id " + config_.node_id + " is not in --peers " + config_.peers_file + " (" +
                           members.Describe() + "); add this node or fix --node-id");
  }

  cluster::PlacementPolicy policy;
  policy.replicas = config_.replicas;
  policy.spacing = config_.replica_spacing;
  const std::string listen = config_.peer_listen.empty() ? self->address : config_.peer_listen;
  TC_ASSIGN_OR_RETURN(replicator_, Replicator::Create(transport_.get(), std::move(members), policy, config_.node_id,
                                                      timeout));
  replicas_ = std::make_unique<ReplicaTiers>(tier_options, verifier_.get());
  if (Status r = replicas_->RecoverAll(); !r.ok()) errors_.Add("replica recovery", r);
  const ThreadPriority background = config_.background_priority_value;
  replication_queue_ = std::make_unique<WorkQueue>(
      "replicate", 1, [background] { LowerThisThreadForBackgroundWork(background, "replicate"); });
  TC_ASSIGN_OR_RETURN(ReplicaAck ack, ParseReplicaAck(config_.replica_ack));
  if (config_.redundancy_value.has_value()) TC_RETURN_IF_ERROR(StartParity(tier_options, timeout));
  MultiNodeDeps md;
  md.parity_member = parity_member_.get();
  md.parity_holder = parity_holder_.get();
  md.node_id = config_.node_id;
  md.replicator = replicator_.get();
  md.replicas = replicas_.get();
  md.queue = replication_queue_.get();
  md.ack = ack;
  if (parity_member_ != nullptr) {
    TC_ASSIGN_OR_RETURN(md.parity_ack, ParseReplicaAck(config_.parity_ack));  // "all" | "none" (decision 146)
  }
  md.replica_count = config_.replicas;
  md.commit_fan_out = config_.commit_fan_out;
  md.listen = [this] { return peer_service_->address(); };
  cluster_ = std::make_unique<MultiNode>(std::move(md));
  PeerServiceDeps pd;
  pd.node_id = config_.node_id;
  pd.transport = transport_.get();
  pd.tier = tier_.get();
  pd.replicas = replicas_.get();
  pd.metrics = &metrics_;
  pd.timeout = timeout;
  pd.replicate_rate = &replicate_rate_;
  Replicator* rep = replicator_.get();
  pd.address_of = [rep](std::string_view id) { return rep->AddressOf(id); };
  pd.ring = &rep->membership();
  pd.parity = parity_holder_.get();
  pd.parity_layout = parity_layout_.get();
  const CommitDeps commit{tier_.get(), cluster_.get()};
  pd.commit_part = [commit](const wire::CommitStepRequest& req, const std::string& coordinator) {
    return CommitOnNode(commit, req, kAnyWriter, coordinator);
  };
  pd.commit_children = [rep](const wire::CommitStepRequest& req, const CommitTree& tree) {
    return rep->CommitChildren(req, tree);
  };
  if (persister_ != nullptr) {
    Persister* p = persister_.get();
    pd.persist_part = [p](MemoryTier* tier, const std::string& ns, uint64_t step) {
      return p->UploadPart(tier, ns, step);
    };
    PartsOptions parts;
    parts.node_id = config_.node_id;
    Cluster* cluster = cluster_.get();
    parts.ask_elsewhere = [rep, cluster, p](const std::string& origin, const std::string& ns,
                                            uint64_t step) -> Result<std::string> {
      Result<std::string> by = rep->PersistPartElsewhere(origin, ns, step);
      if (by.ok() || !cluster->HasParity()) return by;
      return UploadRebuiltPart(cluster, p, origin, ns, step, by.status());
    };
    parts.takeover_after = std::chrono::seconds(config_.takeover_after_s);
    parts.wait_limit = std::chrono::seconds(config_.parts_wait_s);
    p->SetParts(std::move(parts));
  }
  peer_service_ = std::make_unique<PeerService>(std::move(pd));
  if (dns.has_value() && config_.peers_refresh_s > 0) {
    address_refresher_ = std::make_unique<PeerAddressRefresher>(
        *dns, cluster::NewSystemResolver(), HandshakeProbe(transport_.get(), std::min(timeout, peer::Millis(2000))),
        replicator_.get(), std::chrono::seconds(config_.peers_refresh_s));
    address_refresher_->Start();
  }
  if (early_listener_ != nullptr) {
    peer_service_->Start(std::move(early_listener_));
    return Status::Ok();
  }
  return peer_service_->Start(listen);
}

Status Agent::StartParity(const MemoryTierOptions& tier_options, peer::Millis timeout) {
  const cluster::Redundancy& r = *config_.redundancy_value;
  Result<cluster::ParityLayout> layout = cluster::PlaceParity(replicator_->placement().ring, r.k, r.m);
  if (!layout.ok()) {
    return layout.status().WithContext("--redundancy " + r.ToString() + " over the " +
                                       std::to_string(replicator_->placement().ring.size()) +
                                       " agents of --peers " + config_.peers_file +
                                       " (list at least K+M agents, or choose a smaller code)");
  }
  parity_layout_ = std::make_unique<cluster::ParityLayout>(std::move(layout).value());
  ParityHolderOptions ho;
  ho.root = JoinPath(tier_options.root, std::string(kParityDirName));
  ho.budget_bytes = tier_options.budget_bytes;
  parity_holder_ = std::make_unique<ParityHolder>(ho);
  // Before the peer service answers a fold (decision 132).
  Result<ParityRecoveryReport> recovered = parity_holder_->Recover();
  if (!recovered.ok()) {
    errors_.Add("parity recovery", recovered.status());
  } else {
    for (const Status& removed : recovered->removed) errors_.Add("parity recovery", removed);
    Log(LogLevel::kInfo, "parity_recovered").Kv("groups", recovered->groups).Kv("bytes", recovered->bytes);
  }
  TC_ASSIGN_OR_RETURN(ParitySender sender,
                      ParitySender::Create(replicator_.get(), *parity_layout_, config_.node_id));
  const ThreadPriority background = config_.background_priority_value;
  // Two threads: a send waits (up to the peer timeout) for the rest of its
  // group, and one group that never completes must not hold every later step.
  parity_queue_ = std::make_unique<WorkQueue>(
      "parity", 2, [background] { LowerThisThreadForBackgroundWork(background, "parity"); });
  parity_member_ = std::make_unique<ParityMember>(std::move(sender), tier_.get(), parity_queue_.get(),
                                                  std::chrono::milliseconds(timeout.count()));
  parity_member_->AdoptCommitted();
  Log(LogLevel::kWarn, "parity_experimental")
      .Kv("redundancy", r.ToString())
      .Kv("group", parity_member_->Stats().group)
      .Kv("parity_ack", config_.parity_ack)
      .Kv("why",
          config_.parity_ack == "all"
              ? "the erasure-coded tier rebuilds a lost part of a step from its group's survivors once the "
                "step is redundant, which a commit waits for (--parity-ack all; for a step spanning nodes, "
                "its coordinator's commit waits for every member's group, decision 161)"
              : "the erasure-coded tier rebuilds a lost part of a step from its group's survivors only "
                "once the step is redundant, which the commit does not wait for (--parity-ack none)");
  return Status::Ok();
}

std::vector<Gauge> Agent::Gauges() const {
  std::vector<Gauge> g;
  auto add = [&g](std::string name, std::string help, double value,
                  std::vector<std::pair<std::string, std::string>> labels = {}) {
    g.push_back(Gauge{std::move(name), std::move(help), std::move(labels), value});
  };
  const TierStats t = tier_->Stats();
  add("tierckpt_memory_budget_bytes", "the memory tier's budget (--memory-budget)", static_cast<double>(t.budget_bytes));
  add("tierckpt_memory_used_bytes", "bytes the memory tier holds: objects and pooled segments",
      static_cast<double>(t.used_bytes));
  add("tierckpt_memory_free_bytes", "budget left", static_cast<double>(t.budget_bytes > t.used_bytes ? t.budget_bytes - t.used_bytes : 0));
  add("tierckpt_memory_object_bytes", "bytes of object files (steps being written, committed, trash)",
      static_cast<double>(t.object_bytes));
  add("tierckpt_memory_pool_bytes", "bytes of recycled segments ready for the next save", static_cast<double>(t.pool_bytes));
  add("tierckpt_memory_steps", "steps in memory, by state", static_cast<double>(t.committed_steps), {{"state", "committed"}});
  add("tierckpt_memory_steps", "steps in memory, by state", static_cast<double>(t.writing_steps), {{"state", "writing"}});
  if (persister_ != nullptr) {
    add("tierckpt_persist_queue", "steps waiting for or being persisted", static_cast<double>(persister_->queued()), {{"state", "queued"}});
    add("tierckpt_persist_queue", "steps waiting for or being persisted", static_cast<double>(persister_->running()), {{"state", "running"}});
    add("tierckpt_persist_queue", "steps waiting for or being persisted", static_cast<double>(persister_->awaiting_parts()),
        {{"state", "awaiting_parts"}});
  }
  add("tierckpt_connections", "local client connections", static_cast<double>(service_ != nullptr ? service_->connections() : 0));
  cluster_->AddGauges(&g);
  return g;
}

void Agent::StopPreallocating() {
  if (!preallocator_.joinable()) return;
  tier_->Shutdown();  // Preallocate stops at the next segment
  preallocator_.join();
}

void Agent::StopPeers() {
  if (address_refresher_ != nullptr) address_refresher_->Stop();
  if (peer_service_ != nullptr) peer_service_->Stop();
  cluster_->Stop();
  if (parity_member_ != nullptr) parity_member_->Stop();  // its sends end within a slice of their wait
  if (parity_queue_ != nullptr) parity_queue_->Stop();
}

void Agent::Stop() {
  if (service_ != nullptr) service_->Stop();
}

}  // namespace tierckpt::agent
