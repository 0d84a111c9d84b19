// make_corpus.cc — writes the seed corpora of the fuzz targets.
//
//   make_corpus <corpus_dir>
//
// writes <corpus_dir>/frame/*.bin (one valid frame of every request type and
// of each response shape: header + payload, as they travel on the socket) and
// <corpus_dir>/manifest/*.json (valid manifests). The output is deterministic,
// so regenerating the checked-in tests/fuzz/corpus/ leaves it unchanged
// unless the protocol or the manifest format changed.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "os/files.h"
#include "tierckpt/manifest.h"
#include "wire/protocol.h"

namespace tierckpt {
namespace {

using wire::MsgType;

std::string Frame(uint16_t type, uint32_t request_id, const std::string& payload) {
  wire::FrameHeader h;
  h.type = type;
  h.request_id = request_id;
  h.payload_len = static_cast<uint32_t>(payload.size());
  uint8_t header[wire::kFrameHeaderSize];
  wire::EncodeHeader(h, header);
  return std::string(reinterpret_cast<char*>(header), wire::kFrameHeaderSize) + payload;
}

std::string Request(MsgType type, const std::string& payload) {
  return Frame(static_cast<uint16_t>(type), 1, payload);
}

std::string Response(MsgType type, const Status& status, const std::string& body) {
  return Frame(static_cast<uint16_t>(type) | wire::kResponseBit, 1,
               wire::EncodeResponse(status, body));
}

Status Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::string path = JoinPath(dir, name);
  TC_RETURN_IF_ERROR(WriteFileAtomic(path, bytes, /*durable=*/false));
  if (::chmod(path.c_str(), 0644) != 0) return ErrnoStatus("making " + path + " readable");
  return Status::Ok();
}

Manifest SampleManifest(int objects) {
  Manifest m;
  m.ns = "job-1";
  m.step = 1200;
  m.world_size = 4;
  m.created_unix_ms = 1700000000000;
  m.node = "node-a";
  m.objects.push_back({".metadata", 10, ComputeChecksum("0123456789", 10).ToString(), "node-a"});
  for (int i = 0; i < objects; ++i) {
    std::string name = "model/__" + std::to_string(i) + "_0.distcp";
    std::string data(static_cast<size_t>(i + 1), 'x');
    m.objects.push_back({name, data.size(), ComputeChecksum(data.data(), data.size()).ToString(),
                         i % 2 == 0 ? "node-a" : "node-b"});
  }
  return m;
}

Status WriteCorpus(const std::string& root) {
  std::string frames = JoinPath(root, "frame");
  std::string manifests = JoinPath(root, "manifest");
  TC_RETURN_IF_ERROR(MakeDirs(frames, 0755));
  TC_RETURN_IF_ERROR(MakeDirs(manifests, 0755));

  using wire::CommitStepRequest;
  using wire::CreateObjectRequest;
  using wire::JsonBody;
  using wire::SealObjectRequest;
  const std::string ns = "job-1";
  const std::string object = "model/__0_0.distcp";
  const std::string checksum = "xxh3-64:0123456789abcdef";
  auto step = [&](uint64_t s) { return wire::StepRequest{ns, s}.Encode(); };
  const std::string list_json =
      "{\"steps\":[{\"namespace\":\"job-1\",\"step\":1200,\"bytes\":10,"
      "\"objects\":1,\"memory\":\"committed\",\"durable\":\"pending\"}]}";
  const wire::HelloResponse hello{"node-a", "0.1.0", "/dev/shm/tierckpt", "file:///mnt/ckpt"};

  std::vector<std::pair<std::string, std::string>> f = {
      {"req_hello",
       Request(MsgType::kHello, wire::HelloRequest{4242, "tierckpt-cli 0.1", "torchelastic:run-7:0"}.Encode())},
      {"req_begin_step", Request(MsgType::kBeginStep, step(1200))},
      {"req_create_object",
       Request(MsgType::kCreateObject, CreateObjectRequest{ns, 1200, object, 1 << 20}.Encode())},
      {"req_seal_object",
       Request(MsgType::kSealObject,
               SealObjectRequest{ns, 1200, object, 1 << 20, checksum}.Encode())},
      {"req_commit_step",
       Request(MsgType::kCommitStep,
               CommitStepRequest{ns, 1200, 4, true, {".metadata", object}}.Encode())},
      {"req_commit_step_across_nodes",
       Request(MsgType::kCommitStep, CommitStepRequest{ns, 1200, 4, false, {}, {"node-a", "node-b"}}.Encode())},
      {"req_abort_step", Request(MsgType::kAbortStep, step(1201))},
      {"req_list", Request(MsgType::kList, wire::ListRequest{"", true}.Encode())},
      {"req_show", Request(MsgType::kShow, step(1200))},
      {"req_open_object",
       Request(MsgType::kOpenObject, wire::OpenObjectRequest{ns, 1200, ".metadata"}.Encode())},
      {"req_delete_step",
       Request(MsgType::kDeleteStep, wire::DeleteStepRequest{ns, 1100, true}.Encode())},
      {"req_prune", Request(MsgType::kPrune, wire::PruneRequest{ns, 2, 5}.Encode())},
      {"req_stats", Request(MsgType::kStats, "")},
      {"req_wait_durable",
       Request(MsgType::kWaitDurable, wire::WaitDurableRequest{ns, 1200, 60000}.Encode())},
      {"req_restore", Request(MsgType::kRestore, step(1000))},
      {"req_verify", Request(MsgType::kVerify, step(1200))},
      {"req_shutdown", Request(MsgType::kShutdown, "")},
      {"req_persist", Request(MsgType::kPersist, step(1200))},
      {"req_create_next_object",
       Request(MsgType::kCreateNextObject,
               wire::CreateNextObjectRequest{ns, 1200, "__0_", 3, ".distcp", 1 << 20}.Encode())},
      {"req_begin_save", Request(MsgType::kBeginSave, step(1201))},
      {"resp_hello", Response(MsgType::kHello, Status::Ok(), hello.Encode())},
      {"resp_open_object",
       Response(MsgType::kOpenObject, Status::Ok(),
                wire::OpenObjectResponse{10, checksum}.Encode())},
      {"resp_list", Response(MsgType::kList, Status::Ok(), JsonBody{list_json}.Encode())},
      {"resp_commit_step",
       Response(MsgType::kCommitStep, Status::Ok(), JsonBody{SampleManifest(1).ToJson()}.Encode())},
      {"resp_begin_step", Response(MsgType::kBeginStep, Status::Ok(), "")},
      {"resp_create_next_object",
       Response(MsgType::kCreateNextObject, Status::Ok(),
                wire::CreateNextObjectResponse{4, "__0_4.distcp"}.Encode())},
      {"resp_error",
       Response(MsgType::kOpenObject, NotFound("step 1200 of namespace \"job-1\" is in no tier"),
                "")},
  };
  for (const auto& [name, bytes] : f) TC_RETURN_IF_ERROR(Write(frames, name + ".bin", bytes));

  TC_RETURN_IF_ERROR(Write(manifests, "small.json", SampleManifest(1).ToJson()));
  TC_RETURN_IF_ERROR(Write(manifests, "several.json", SampleManifest(6).ToJson()));
  Manifest across = SampleManifest(3);  // a step spanning nodes, merged from its parts
  across.members = {"node-a", "node-b"};
  across.placement = R"({"format":"tierckpt.placement","version":1,"replicas":2,"spacing":1,)"
                     R"("ring":["node-a","node-b"],"nodes":[{"node":"node-a","replicas":["node-b"]},)"
                     R"({"node":"node-b","replicas":["node-a"]}]})";
  TC_RETURN_IF_ERROR(Write(manifests, "across_nodes.json", across.ToJson()));
  // Compact, keys in another order, no total_bytes: still valid.
  TC_RETURN_IF_ERROR(Write(manifests, "compact.json",
                           "{\"version\":1,\"format\":\"tierckpt.manifest\",\"step\":9999999999,"
                           "\"namespace\":\"a.b_c-d\",\"world_size\":4294967295,"
                           "\"created_unix_ms\":0,\"node\":\"n\\u00e9\",\"objects\":[{\"name\":"
                           "\"a/b/c\",\"size\":18446744073709551615,"
                           "\"checksum\":\"xxh3-64:ffffffffffffffff\",\"node\":\"\"}]}"));
  Manifest empty;
  empty.ns = "n";
  empty.step = 0;
  TC_RETURN_IF_ERROR(Write(manifests, "empty.json", empty.ToJson()));
  return Status::Ok();
}

}  // namespace
}  // namespace tierckpt

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: make_corpus <corpus_dir>  (writes <corpus_dir>/frame and /manifest)\n");
    return 2;
  }
  tierckpt::Status s = tierckpt::WriteCorpus(argv[1]);
  if (!s.ok()) {
    std::fprintf(stderr, "make_corpus: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
