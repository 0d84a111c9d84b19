// fuzz_parity_record.cc — fuzz target for ec::ParityRecord::Parse, the record
// a parity holder keeps beside its parity pieces (src/ec/parity_record.h).
//
// Any input must either be rejected with kCorruption or parse into a record
// that validates and survives ToJson → Parse unchanged (equal, and the second
// ToJson identical to the first). abort() otherwise.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ec/parity_record.h"

namespace tierckpt::ec {
namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

void FuzzOne(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<ParityRecord> r = ParityRecord::Parse(text, "fuzz-input");
  if (!r.ok()) {
    Check(r.status().code() == Code::kCorruption);
    return;
  }
  Check(r->Validate().ok());
  const std::string json = r->ToJson();
  Result<ParityRecord> again = ParityRecord::Parse(json, "fuzz-roundtrip");
  Check(again.ok());
  Check(*again == *r);
  Check(again->ToJson() == json);
  ParityRecord merged = *r;
  Check(merged.Merge(*again).ok() && merged == *r);  // merging a record with itself changes nothing
}

}  // namespace
}  // namespace tierckpt::ec

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tierckpt::ec::FuzzOne(data, size);
  return 0;
}
