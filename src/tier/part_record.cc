// part_record.cc — see part_record.h.
#include "tier/part_record.h"

#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace tierckpt::agent {
namespace {

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "xxh3-64:%016" PRIx64, v);
  return buf;
}

Status Bad(std::string_view where, const std::string& what) {
  return Corruption("part record " + std::string(where) + ": " + what +
                    "; it was not written by a tierckpt agent or is damaged: have the member upload its part again "
                    "(`tierckpt persist` on it, or on a holder of its replica)");
}

}  // namespace

MemberListDigest DigestMembers(const std::vector<std::string>& members) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  for (const std::string& id : members) {
    XXH3_64bits_update(state, id.data(), id.size());
    XXH3_64bits_update(state, "\n", 1);
  }
  MemberListDigest d{members.size(), XXH3_64bits_digest(state)};
  XXH3_freeState(state);
  return d;
}

std::string DescribeMembers(const MemberListDigest& d) {
  return std::to_string(d.count) + " members, digest " + Hex(d.digest);
}

MemberListDigest DigestOfPart(const Manifest& part) {
  if (part.member_ref) return MemberListDigest{part.member_ref->count, part.member_ref->digest};
  return DigestMembers(part.members);
}

std::string EncodePartRecord(const Manifest& part) {
  const MemberListDigest d = DigestOfPart(part);
  Manifest own = part;
  own.members.clear();
  own.member_ref.reset();
  nlohmann::ordered_json j;
  j["format"] = kPartRecordFormat;
  j["version"] = kPartRecordVersion;
  j["members"] = {{"count", d.count}, {"digest", Hex(d.digest)}};
  if (!part.members.empty()) {
    // The coordinator's part (or a part written before decision 116): the
    // one record a merger whose own part has no list reads it from, with
    // the placement the merged manifest takes.
    j["members"]["ids"] = part.members;
  } else {
    own.placement.clear();  // a non-coordinator part has none anyway
  }
  j["part"] = nlohmann::ordered_json::parse(own.ToJson());
  return j.dump() + "\n";  // read by agents only: compact
}

Result<PartRecord> ParsePartRecord(std::string_view text, std::string_view where) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad(where, "not a JSON object");
  auto format = j.find("format");
  if (format == j.end() || !format->is_string()) return Bad(where, "no \"format\"");
  PartRecord out;
  if (format->get<std::string>() != kPartRecordFormat) {
    // Format 1: the part manifest itself, with its member list.
    TC_ASSIGN_OR_RETURN(out.part, Manifest::Parse(text, where));
    return out;
  }
  auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != kPartRecordVersion) {
    return Bad(where, "version " + (version == j.end() ? std::string("(none)") : version->dump()) +
                          " is not one this agent reads (" + std::to_string(kPartRecordVersion) +
                          "); run one tierckpt version on every member");
  }
  auto members = j.find("members");
  if (members == j.end() || !members->is_object()) return Bad(where, "field \"members\" must be an object");
  auto count = members->find("count");
  auto digest = members->find("digest");
  if (count == members->end() || !count->is_number_unsigned() || digest == members->end() || !digest->is_string()) {
    return Bad(where, "field \"members\" needs \"count\" and \"digest\"");
  }
  const std::string d = digest->get<std::string>();
  unsigned long long value = 0;
  int used = 0;
  if (d.size() != 24 || std::sscanf(d.c_str(), "xxh3-64:%16llx%n", &value, &used) != 1 || used != 24) {
    return Bad(where, "members digest \"" + d + "\" is not xxh3-64:<16 hex digits>");
  }
  out.members_digest = MemberListDigest{count->get<uint64_t>(), static_cast<uint64_t>(value)};
  if (auto ids = members->find("ids"); ids != members->end()) {
    if (!ids->is_array()) return Bad(where, "field \"members.ids\" must be an array of node ids");
    for (const auto& id : *ids) {
      if (!id.is_string()) return Bad(where, "field \"members.ids\" must be an array of node ids");
      out.member_ids.push_back(id.get<std::string>());
    }
    const bool sorted = std::is_sorted(out.member_ids.begin(), out.member_ids.end());
    if (!sorted || DigestMembers(out.member_ids) != *out.members_digest) {
      return Bad(where, "its member ids (" + DescribeMembers(DigestMembers(out.member_ids)) +
                            (sorted ? "" : ", not sorted") + ") do not match its count and digest (" +
                            DescribeMembers(*out.members_digest) + ")");
    }
  }
  auto part = j.find("part");
  if (part == j.end() || !part->is_object()) return Bad(where, "field \"part\" must be a part manifest");
  TC_ASSIGN_OR_RETURN(out.part, Manifest::Parse(part->dump(), where));
  if (!out.part.members.empty() || out.part.member_ref) {
    return Bad(where, "its part names members beside the members' digest");
  }
  return out;
}

}  // namespace tierckpt::agent
