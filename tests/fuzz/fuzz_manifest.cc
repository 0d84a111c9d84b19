// fuzz_manifest.cc — fuzz target for Manifest::Parse.
//
// Any input must either be rejected with kCorruption or parse into a
// manifest that survives ToJson → Parse unchanged (every field equal, and
// the second ToJson identical to the first). abort() otherwise.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tierckpt/manifest.h"

namespace tierckpt {
namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

bool SameManifest(const Manifest& a, const Manifest& b) {
  if (a.ns != b.ns || a.step != b.step || a.world_size != b.world_size ||
      a.created_unix_ms != b.created_unix_ms || a.node != b.node ||
      a.objects.size() != b.objects.size()) {
    return false;
  }
  for (size_t i = 0; i < a.objects.size(); ++i) {
    const ObjectEntry& x = a.objects[i];
    const ObjectEntry& y = b.objects[i];
    if (x.name != y.name || x.size != y.size || x.checksum != y.checksum || x.node != y.node) {
      return false;
    }
  }
  return true;
}

void FuzzOne(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = Manifest::Parse(text, "fuzz-input");
  if (!m.ok()) {
    Check(m.status().code() == Code::kCorruption);
    return;
  }
  Check(m->Validate().ok());
  std::string json = m->ToJson();
  auto again = Manifest::Parse(json, "fuzz-roundtrip");
  Check(again.ok());
  Check(SameManifest(*m, *again));
  Check(again->ToJson() == json);
}

}  // namespace
}  // namespace tierckpt

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tierckpt::FuzzOne(data, size);
  return 0;
}
