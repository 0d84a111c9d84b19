// The read check decision, and the ReadVerify mode names.
#include "client/read_verify.h"

#include <string>

#include "wire/protocol.h"

namespace tierckpt {

Result<ReadVerify::Mode> ParseReadVerifyMode(std::string_view text) {
  if (text == "always") return ReadVerify::Mode::kAlways;
  if (text == "attested") return ReadVerify::Mode::kAttested;
  if (text == "never") return ReadVerify::Mode::kNever;
  return InvalidArgument("read verify mode \"" + std::string(text.substr(0, 40)) +
                         "\" is unknown; use \"always\" (re-hash every object, the default), \"attested\" "
                         "(skip the hash when the agent verified the bytes recently) or \"never\"");
}

std::string_view ReadVerifyModeName(ReadVerify::Mode mode) {
  switch (mode) {
    case ReadVerify::Mode::kAlways:
      return "always";
    case ReadVerify::Mode::kAttested:
      return "attested";
    case ReadVerify::Mode::kNever:
      return "never";
  }
  return "always";
}

namespace client {

ReadCheck DecideReadCheck(const ReadVerify& verify, uint64_t verified_age_ms) {
  switch (verify.mode) {
    case ReadVerify::Mode::kNever:
      return ReadCheck::kUnverified;
    case ReadVerify::Mode::kAttested: {
      if (verified_age_ms == wire::kNeverVerifiedAgeMs || verify.max_age.count() < 0) return ReadCheck::kHash;
      const uint64_t limit = static_cast<uint64_t>(verify.max_age.count());
      return verified_age_ms <= limit ? ReadCheck::kAttested : ReadCheck::kHash;
    }
    case ReadVerify::Mode::kAlways:
      break;
  }
  return ReadCheck::kHash;
}

}  // namespace client
}  // namespace tierckpt
