#include "tierckpt/status.h"

namespace tierckpt {

std::string_view ToString(Code code) {
  switch (code) {
#define TIERCKPT_STATUS_CASE(name, number, desc) \
  case Code::name:                               \
    return desc;
    TIERCKPT_STATUS_CODES(TIERCKPT_STATUS_CASE)
#undef TIERCKPT_STATUS_CASE
  }
  return "unknown code";
}

Code CodeFromNumber(uint32_t number) {
  switch (number) {
#define TIERCKPT_STATUS_NUM(name, n, desc) \
  case n:                                  \
    return Code::name;
    TIERCKPT_STATUS_CODES(TIERCKPT_STATUS_NUM)
#undef TIERCKPT_STATUS_NUM
  }
  return Code::kInternal;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out(tierckpt::ToString(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

}  // namespace tierckpt
