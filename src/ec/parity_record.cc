// parity_record.cc — see parity_record.h.
#include "ec/parity_record.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "common/checksum.h"
#include "common/names.h"

namespace tierckpt::ec {
namespace {

using nlohmann::json;

constexpr uint32_t kMaxPieces = 256;  // GF(2^8); ReedSolomon::kMaxPieces

Status Bad(std::string_view source, const std::string& what) {
  return Corruption("parity record " + std::string(source) + ": " + what +
                    "; its parity cannot be trusted, compute it again from the group's parts");
}

std::string DataAt(size_t i) { return "data[" + std::to_string(i) + "]"; }

// The part manifest fields a PartHeader holds, as the manifest spells them.
constexpr std::string_view kHeaderKeys[] = {"world_size", "created_unix_ms", "members", "member_ref",
                                            "placement"};

bool IsHeaderKey(std::string_view key) {
  return std::find(std::begin(kHeaderKeys), std::end(kHeaderKeys), key) != std::end(kHeaderKeys);
}

Manifest ManifestOf(const ParityRecord& r, const DataPiece& d, const PartHeader& h) {
  Manifest m;
  m.ns = r.ns;
  m.step = r.step;
  m.node = d.member;
  m.world_size = h.world_size;
  m.created_unix_ms = h.created_unix_ms;
  m.members = h.members;
  m.member_ref = h.member_ref;
  m.placement = h.placement;
  for (const PieceObject& o : d.objects) m.objects.push_back({o.name, o.size, o.checksum, d.member});
  return m;
}

// The header's fields as the part manifest writes them (Manifest::ToJson).
json HeaderJson(const ParityRecord& r, const DataPiece& d, const PartHeader& h) {
  DataPiece bare{.member = d.member};
  const json whole = json::parse(ManifestOf(r, bare, h).ToJson(), nullptr, /*allow_exceptions=*/false);
  json out = json::object();
  for (std::string_view key : kHeaderKeys) {
    if (auto it = whole.find(key); it != whole.end()) out[std::string(key)] = *it;
  }
  return out;
}

// A data piece's "part", read as the manifest reads these fields.
Result<PartHeader> ParseHeader(const json& part, const ParityRecord& r, const std::string& member,
                               const std::string& where) {
  if (!part.is_object()) return InvalidArgument("field \"" + where + "\" must be an object");
  json whole = json::object();
  for (const auto& [key, value] : part.items()) {
    if (!IsHeaderKey(key)) {
      return InvalidArgument("field " + QuoteForMessage(where + "." + key) + " is not a part manifest field");
    }
    whole[key] = value;
  }
  whole["format"] = kManifestFormat;
  whole["version"] = kManifestVersion;
  whole["namespace"] = r.ns;
  whole["step"] = r.step;
  whole["node"] = member;
  whole["objects"] = json::array();
  Result<Manifest> m = Manifest::Parse(whole.dump(), "fields of " + where);
  if (!m.ok()) {
    // The manifest's advice (restore the step from another tier) is not this record's.
    std::string why = m.status().message();
    if (size_t cut = why.find("; the step cannot be trusted"); cut != std::string::npos) why.resize(cut);
    return InvalidArgument(why);
  }
  if (m->checksums_pending || m->span) return InvalidArgument("field \"" + where + "\" holds a field it may not");
  return HeaderOf(*m);
}

}  // namespace

PartHeader HeaderOf(const Manifest& part) {
  return PartHeader{part.world_size, part.created_unix_ms, part.members, part.member_ref, part.placement};
}

std::optional<Manifest> ParityRecord::PartManifest(uint32_t i) const {
  if (i >= data.size() || !data[i].part) return std::nullopt;
  return ManifestOf(*this, data[i], *data[i].part);
}

uint64_t ParityRecord::PieceLength() const {
  uint64_t longest = 0;
  for (const DataPiece& d : data) longest = std::max(longest, d.length);
  return longest;
}

const ParityPiece* ParityRecord::FindParity(uint32_t j) const {
  for (const ParityPiece& p : parity) {
    if (p.index == j) return &p;
  }
  return nullptr;
}

std::string ParityRecord::ToJson() const {
  json j;
  j["format"] = kParityRecordFormat;
  j["version"] = kParityRecordVersion;
  j["namespace"] = ns;
  j["step"] = step;
  j["group"] = group;
  j["k"] = k;
  j["m"] = m;
  json ds = json::array();
  for (const DataPiece& d : data) {
    json objs = json::array();
    for (const PieceObject& o : d.objects) {
      objs.push_back({{"name", o.name}, {"size", o.size}, {"checksum", o.checksum}});
    }
    json dj = {{"member", d.member}, {"piece_length", d.length}, {"objects", std::move(objs)}};
    if (d.part) dj["part"] = HeaderJson(*this, d, *d.part);
    ds.push_back(std::move(dj));
  }
  j["data"] = std::move(ds);
  json ps = json::array();
  for (const ParityPiece& p : parity) {
    ps.push_back({{"index", p.index}, {"length", p.length}, {"checksum", p.checksum}});
  }
  j["parity"] = std::move(ps);
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Status ParityRecord::Validate() const {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns).WithContext("namespace"));
  TC_RETURN_IF_ERROR(ValidateStep(step).WithContext("step"));
  if (k < 1 || m < 1 || k + m > kMaxPieces) {
    return InvalidArgument("code rs:" + std::to_string(k) + "+" + std::to_string(m) +
                           " needs k ≥ 1, m ≥ 1 and k + m ≤ " + std::to_string(kMaxPieces));
  }
  if (data.empty() || data.size() > k) {
    return InvalidArgument("data lists " + std::to_string(data.size()) + " pieces; a group of rs:" +
                           std::to_string(k) + "+" + std::to_string(m) + " has 1 to " + std::to_string(k));
  }
  std::set<std::string_view> members;
  for (size_t i = 0; i < data.size(); ++i) {
    const DataPiece& d = data[i];
    // Node ids follow the namespace rule (cluster/address.h).
    TC_RETURN_IF_ERROR(ValidateNamespace(d.member).WithContext(DataAt(i) + ".member (a node id)"));
    if (!members.insert(d.member).second) {
      return InvalidArgument(DataAt(i) + ".member \"" + d.member + "\" is another data piece's member too");
    }
    uint64_t sum = 0;
    for (size_t o = 0; o < d.objects.size(); ++o) {
      const PieceObject& obj = d.objects[o];
      const std::string where = DataAt(i) + ".objects[" + std::to_string(o) + "]";
      TC_RETURN_IF_ERROR(ValidateObjectName(obj.name).WithContext(where + ".name"));
      TC_RETURN_IF_ERROR(Checksum::Parse(obj.checksum).status().WithContext(where + ".checksum"));
      if (o > 0 && obj.name <= d.objects[o - 1].name) {
        return InvalidArgument(where + ".name \"" + obj.name + "\" is not after \"" + d.objects[o - 1].name +
                               "\": objects must be sorted by name and unique");
      }
      if (obj.size > UINT64_MAX - sum) return InvalidArgument(where + ".size overflows the piece length");
      sum += obj.size;
    }
    if (sum != d.length) {
      return InvalidArgument(DataAt(i) + ".piece_length is " + std::to_string(d.length) +
                             " but its objects' sizes sum to " + std::to_string(sum));
    }
    if (d.part) {
      TC_RETURN_IF_ERROR(ManifestOf(*this, d, *d.part).Validate().WithContext(DataAt(i) + ".part"));
    }
  }
  if (parity.empty()) return InvalidArgument("parity lists no piece");
  const uint64_t len = PieceLength();
  for (size_t p = 0; p < parity.size(); ++p) {
    const ParityPiece& pp = parity[p];
    const std::string where = "parity[" + std::to_string(p) + "]";
    if (pp.index >= m) {
      return InvalidArgument(where + ".index is " + std::to_string(pp.index) +
                             ", not below m = " + std::to_string(m));
    }
    if (p > 0 && pp.index <= parity[p - 1].index) {
      return InvalidArgument(where + ".index " + std::to_string(pp.index) +
                             " is not above the previous one's " + std::to_string(parity[p - 1].index) +
                             ": parity pieces must be by index and unique");
    }
    if (pp.length != len) {
      return InvalidArgument(where + ".length is " + std::to_string(pp.length) +
                             " but the longest data piece is " + std::to_string(len));
    }
    TC_RETURN_IF_ERROR(Checksum::Parse(pp.checksum).status().WithContext(where + ".checksum"));
  }
  return Status::Ok();
}

Status ParityRecord::Merge(const ParityRecord& other) {
  // The data pieces, each header taken from whichever record has it.
  std::vector<DataPiece> joined = data;
  bool same = data.size() == other.data.size();
  for (size_t i = 0; same && i < joined.size(); ++i) {
    DataPiece theirs = other.data[i];
    if (!joined[i].part) joined[i].part = theirs.part;
    if (!theirs.part) theirs.part = joined[i].part;
    same = joined[i] == theirs;
  }
  if (ns != other.ns || step != other.step || group != other.group || k != other.k || m != other.m || !same) {
    return InvalidArgument(
        "parity records of " + ns + " step " + std::to_string(step) + " group " + std::to_string(group) +
        " and of " + other.ns + " step " + std::to_string(other.step) + " group " +
        std::to_string(other.group) +
        " differ in more than their parity pieces; they describe different parts and cannot "
        "be merged");
  }
  std::vector<ParityPiece> merged = parity;
  for (const ParityPiece& p : other.parity) {
    if (const ParityPiece* mine = FindParity(p.index)) {
      if (*mine != p) {
        return InvalidArgument("parity piece " + std::to_string(p.index) + " of " + ns + " step " +
                               std::to_string(step) + " group " + std::to_string(group) +
                               " has two different checksums (" + mine->checksum + ", " + p.checksum +
                               "); one holder's piece is corrupt");
      }
      continue;
    }
    merged.push_back(p);
  }
  std::sort(merged.begin(), merged.end(),
            [](const ParityPiece& a, const ParityPiece& b) { return a.index < b.index; });
  parity = std::move(merged);
  data = std::move(joined);
  return Status::Ok();
}

Result<ParityRecord> ParityRecord::Parse(std::string_view text, std::string_view source) {
  if (text.size() > kMaxParityRecordBytes) {
    return Bad(source, "is " + std::to_string(text.size()) + " bytes, above the " +
                           std::to_string(kMaxParityRecordBytes) + "-byte limit");
  }
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad(source, "is not a JSON object");
  auto str = [&](const json& obj, const char* key, const std::string& where, std::string* out) -> Status {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string())
      return Bad(source, "field \"" + where + key + "\" must be a string");
    *out = it->get<std::string>();
    return Status::Ok();
  };
  auto num = [&](const json& obj, const char* key, const std::string& where, uint64_t max,
                 uint64_t* out) -> Status {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_unsigned()) {
      return Bad(source, "field \"" + where + key + "\" must be a non-negative integer");
    }
    *out = it->get<uint64_t>();
    if (*out > max)
      return Bad(source, "field \"" + where + key + "\" is " + std::to_string(*out) + ", above " +
                             std::to_string(max));
    return Status::Ok();
  };
  auto u32 = [&](const json& obj, const char* key, const std::string& where, uint32_t* out) -> Status {
    uint64_t v = 0;
    TC_RETURN_IF_ERROR(num(obj, key, where, UINT32_MAX, &v));
    *out = static_cast<uint32_t>(v);
    return Status::Ok();
  };
  std::string format;
  TC_RETURN_IF_ERROR(str(j, "format", "", &format));
  if (format != kParityRecordFormat) {
    return Bad(source, "format is " + QuoteForMessage(format) + ", not " + std::string(kParityRecordFormat));
  }
  uint64_t version = 0;
  TC_RETURN_IF_ERROR(num(j, "version", "", UINT64_MAX, &version));
  if (version != static_cast<uint64_t>(kParityRecordVersion)) {
    return Bad(source, "has version " + std::to_string(version) + " but this build reads version " +
                           std::to_string(kParityRecordVersion) +
                           " (upgrade tierckpt to read newer records)");
  }
  ParityRecord r;
  TC_RETURN_IF_ERROR(str(j, "namespace", "", &r.ns));
  TC_RETURN_IF_ERROR(num(j, "step", "", UINT64_MAX, &r.step));
  TC_RETURN_IF_ERROR(u32(j, "group", "", &r.group));
  TC_RETURN_IF_ERROR(u32(j, "k", "", &r.k));
  TC_RETURN_IF_ERROR(u32(j, "m", "", &r.m));
  auto data = j.find("data");
  if (data == j.end() || !data->is_array()) return Bad(source, "field \"data\" must be an array");
  if (data->size() > kMaxPieces)
    return Bad(source, "field \"data\" lists more than " + std::to_string(kMaxPieces));
  for (size_t i = 0; i < data->size(); ++i) {
    const json& d = (*data)[i];
    const std::string where = DataAt(i) + ".";
    if (!d.is_object()) return Bad(source, "field \"" + DataAt(i) + "\" must be an object");
    DataPiece piece;
    TC_RETURN_IF_ERROR(str(d, "member", where, &piece.member));
    TC_RETURN_IF_ERROR(num(d, "piece_length", where, UINT64_MAX, &piece.length));
    auto objs = d.find("objects");
    if (objs == d.end() || !objs->is_array())
      return Bad(source, "field \"" + where + "objects\" must be an array");
    piece.objects.reserve(objs->size());
    for (size_t o = 0; o < objs->size(); ++o) {
      const json& obj = (*objs)[o];
      const std::string owhere = where + "objects[" + std::to_string(o) + "].";
      if (!obj.is_object())
        return Bad(source, "field \"" + where + "objects[" + std::to_string(o) + "]\" must be an object");
      PieceObject po;
      TC_RETURN_IF_ERROR(str(obj, "name", owhere, &po.name));
      TC_RETURN_IF_ERROR(num(obj, "size", owhere, UINT64_MAX, &po.size));
      TC_RETURN_IF_ERROR(str(obj, "checksum", owhere, &po.checksum));
      piece.objects.push_back(std::move(po));
    }
    if (auto part = d.find("part"); part != d.end()) {
      Result<PartHeader> h = ParseHeader(*part, r, piece.member, DataAt(i) + ".part");
      if (!h.ok()) return Bad(source, h.status().message());
      piece.part = std::move(*h);
    }
    r.data.push_back(std::move(piece));
  }
  auto parity = j.find("parity");
  if (parity == j.end() || !parity->is_array()) return Bad(source, "field \"parity\" must be an array");
  if (parity->size() > kMaxPieces)
    return Bad(source, "field \"parity\" lists more than " + std::to_string(kMaxPieces));
  for (size_t p = 0; p < parity->size(); ++p) {
    const json& pj = (*parity)[p];
    const std::string where = "parity[" + std::to_string(p) + "].";
    if (!pj.is_object()) return Bad(source, "field \"parity[" + std::to_string(p) + "]\" must be an object");
    ParityPiece pp;
    TC_RETURN_IF_ERROR(u32(pj, "index", where, &pp.index));
    TC_RETURN_IF_ERROR(num(pj, "length", where, UINT64_MAX, &pp.length));
    TC_RETURN_IF_ERROR(str(pj, "checksum", where, &pp.checksum));
    r.parity.push_back(std::move(pp));
  }
  Status v = r.Validate();
  if (!v.ok()) return Bad(source, v.message());
  return r;
}

}  // namespace tierckpt::ec
