// make_corpus.cc — writes the seed corpora of the fuzz targets.
//
//   make_corpus <corpus_dir>
//
// writes <corpus_dir>/frame/*.bin (one valid frame of every request type and
// of every response, header + payload as they travel on the socket, plus an
// error response), <corpus_dir>/peer_messages/* (a selector byte and a valid
// payload for every peer message and frame kind fuzz_peer_messages decodes),
// <corpus_dir>/manifest/*.json (valid manifests) and
// <corpus_dir>/parity_record/*.json (valid parity records). The frames and peer
// payloads are built from the message declarations alone (samples.h over
// TIERCKPT_WIRE_MSG_TYPES, TIERCKPT_PEER_MSGS and TIERCKPT_PEER_FRAME_KINDS),
// so a message added there gets its seed here. The output is deterministic,
// so regenerating the checked-in tests/fuzz/corpus/ leaves it unchanged
// unless the protocols or the manifest format changed.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "os/files.h"
#include "samples.h"
#include "ec/parity_record.h"
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

std::string RequestFrame(MsgType type, const std::string& payload) {
  return Frame(static_cast<uint16_t>(type), 1, payload);
}

std::string ResponseFrame(MsgType type, const Status& status, const std::string& body) {
  return Frame(static_cast<uint16_t>(type) | wire::kResponseBit, 1, wire::EncodeResponse(status, body));
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

// "CommitStep" -> "commit_step".
std::string SnakeCase(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c >= 'A' && c <= 'Z') {
      if (!out.empty() && out.back() != '_') out += '_';
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      out += c;
    }
  }
  return out;
}

Status WriteCorpus(const std::string& root) {
  std::string frames = JoinPath(root, "frame");
  std::string peer = JoinPath(root, "peer_messages");
  std::string manifests = JoinPath(root, "manifest");
  std::string parity = JoinPath(root, "parity_record");
  TC_RETURN_IF_ERROR(MakeDirs(frames, 0755));
  TC_RETURN_IF_ERROR(MakeDirs(peer, 0755));
  TC_RETURN_IF_ERROR(MakeDirs(manifests, 0755));
  TC_RETURN_IF_ERROR(MakeDirs(parity, 0755));

  // Every request and every response of the local protocol, from the table.
  std::vector<std::pair<std::string, std::string>> f = {
#define TIERCKPT_CORPUS_FRAMES(name, number, text, Request, Response, limit)                       \
  {"req_" + SnakeCase(text), RequestFrame(MsgType::name, fuzz::Sample<wire::Request>().Encode())}, \
      {"resp_" + SnakeCase(text),                                                                  \
       ResponseFrame(MsgType::name, Status::Ok(), fuzz::Sample<wire::Response>().Encode())},
      TIERCKPT_WIRE_MSG_TYPES(TIERCKPT_CORPUS_FRAMES)
#undef TIERCKPT_CORPUS_FRAMES
  };
  f.emplace_back(
      "resp_commit_step_manifest",
      ResponseFrame(MsgType::kCommitStep, Status::Ok(), wire::JsonBody{SampleManifest(1).ToJson()}.Encode()));
  f.emplace_back("resp_error", ResponseFrame(MsgType::kOpenObject,
                                             NotFound("step 1200 of namespace \"job-1\" is in no tier"), ""));
  for (const auto& [name, bytes] : f) TC_RETURN_IF_ERROR(Write(frames, name + ".bin", bytes));

  // Every peer message and frame payload fuzz_peer_messages decodes: the
  // selector byte, then the payload.
  for (size_t i = 0; i < fuzz::kPeerDecoderCount; ++i) {
    std::optional<std::string> seed = fuzz::kPeerDecoders[i].seed();
    if (!seed) continue;
    const std::string bytes = std::string(1, static_cast<char>(i)) + *seed;
    TC_RETURN_IF_ERROR(Write(peer, SnakeCase(fuzz::kPeerDecoders[i].name), bytes));
  }

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

  // Parity records (src/ec/parity_record.h): a full group of rs:4+2 with
  // both pieces, a short group's one holder, and a compact one.
  ec::ParityRecord rec;
  rec.ns = "job-1";
  rec.step = 1200;
  rec.group = 1;
  rec.k = 4;
  rec.m = 2;
  for (const char* node : {"node-a", "node-b", "node-c", "node-d"}) {
    Manifest part = SampleManifest(std::string_view(node) == "node-c" ? 0 : 3);
    ec::DataPiece d{.member = node};
    for (const ObjectEntry& o : part.objects) {
      d.objects.push_back({o.name, o.size, o.checksum});
      d.length += o.size;
    }
    rec.data.push_back(std::move(d));
  }
  rec.parity = {{0, rec.PieceLength(), "xxh3-64:0123456789abcdef"},
                {1, rec.PieceLength(), "xxh3-64:fedcba9876543210"}};
  TC_RETURN_IF_ERROR(Write(parity, "group.json", rec.ToJson()));
  ec::ParityRecord short_group = rec;
  short_group.data.resize(2);
  short_group.parity = {{1, short_group.PieceLength(), "xxh3-64:00000000000000ff"}};
  TC_RETURN_IF_ERROR(Write(parity, "short_group.json", short_group.ToJson()));
  // A step spanning the group's members (decision 141): each piece carries
  // its part manifest's fields, the coordinator's with the members and the
  // placement, the others' with their member_ref.
  ec::ParityRecord spanning = rec;
  const std::vector<std::string> ids = {"node-a", "node-b", "node-c", "node-d"};
  for (uint32_t i = 0; i < spanning.data.size(); ++i) {
    ec::PartHeader h{.world_size = 8, .created_unix_ms = 1700000000000ULL + i};
    if (i == 0) {
      h.members = ids;
      h.placement = R"({"format":"tierckpt.placement","version":1})";
    } else {
      h.member_ref = MemberRef{4, i, 0x0123456789abcdefULL, "node-a"};
    }
    spanning.data[i].part = std::move(h);
  }
  TC_RETURN_IF_ERROR(Write(parity, "spanning.json", spanning.ToJson()));
  TC_RETURN_IF_ERROR(Write(parity, "compact.json",
                           "{\"parity\":[{\"checksum\":\"xxh3-64:ffffffffffffffff\",\"length\":0,"
                           "\"index\":0}],\"version\":1,\"format\":\"tierckpt.parity\",\"namespace\":\"n\","
                           "\"step\":0,\"group\":4294967295,\"k\":1,\"m\":1,\"data\":[{\"member\":\"x\","
                           "\"piece_length\":0,\"objects\":[{\"name\":\"a\",\"size\":0,"
                           "\"checksum\":\"xxh3-64:2d06800538d394c2\"}]}]}"));
  return Status::Ok();
}

}  // namespace
}  // namespace tierckpt

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: make_corpus <corpus_dir>  (writes <corpus_dir>/frame, /manifest, /parity_record and "
                 "/peer_messages)\n");
    return 2;
  }
  tierckpt::Status s = tierckpt::WriteCorpus(argv[1]);
  if (!s.ok()) {
    std::fprintf(stderr, "make_corpus: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
