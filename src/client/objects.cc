// WritableObject and ObjectView: handles over mappings of shared memory.
#include <string>
#include <utility>

#include "client/client_internal.h"
#include "os/fs_stat.h"
#include "tierckpt/client.h"
#include "wire/protocol.h"

namespace tierckpt {
namespace {

const std::string kEmpty;

std::string ObjectPath(const std::string& ns, uint64_t step, const std::string& name) {
  return ns + "/" + std::to_string(step) + "/" + name;
}

}  // namespace

WritableObject::WritableObject() = default;
WritableObject::~WritableObject() = default;
WritableObject::WritableObject(WritableObject&&) noexcept = default;
WritableObject& WritableObject::operator=(WritableObject&&) noexcept = default;

uint8_t* WritableObject::data() const { return impl_ ? impl_->lease.data() : nullptr; }
size_t WritableObject::size() const { return impl_ ? impl_->size : 0; }
const std::string& WritableObject::name() const { return impl_ ? impl_->name : kEmpty; }

ObjectView::ObjectView() = default;
ObjectView::~ObjectView() = default;
ObjectView::ObjectView(ObjectView&&) noexcept = default;
ObjectView& ObjectView::operator=(ObjectView&&) noexcept = default;

const uint8_t* ObjectView::data() const { return impl_ ? impl_->lease.data() : nullptr; }
size_t ObjectView::size() const { return impl_ ? impl_->lease.size() : 0; }
const std::string& ObjectView::name() const { return impl_ ? impl_->name : kEmpty; }
const std::string& ObjectView::checksum() const { return impl_ ? impl_->checksum : kEmpty; }
const std::string& ObjectView::repaired() const { return impl_ ? impl_->repaired : kEmpty; }
bool ObjectView::hash_due() const { return impl_ && impl_->hash_due; }
std::optional<std::chrono::milliseconds> ObjectView::verified_age() const {
  if (!impl_ || impl_->verified_age_ms == wire::kNeverVerifiedAgeMs) return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(impl_->verified_age_ms));
}

Status CheckObjectChecksum(const std::string& ns, uint64_t step, const std::string& name,
                           const Checksum& expected, const Checksum& got) {
  if (got == expected) return Status::Ok();
  return Corruption("object " + ObjectPath(ns, step, name) + " in the memory tier is corrupt: expected " +
                    expected.ToString() + ", got " + got.ToString() +
                    "; drop the memory copy (`tierckpt rm " + ns + " " + std::to_string(step) +
                    "`) and read it again from the durable tier");
}

Status ObjectView::Verify() const {
  if (!impl_) return FailedPrecondition("ObjectView::Verify on an empty view (Client::Open did not fill it)");
  const Impl& v = *impl_;
  return CheckObjectChecksum(v.ns, v.step, v.name, v.expected,
                             ComputeChecksum(v.lease.data(), v.lease.size()));
}

Status ObjectView::Unchanged() const {
  if (!impl_)
    return FailedPrecondition("ObjectView::Unchanged on an empty view (Client::Open did not fill it)");
  const Impl& v = *impl_;
  const std::string what = "object " + ObjectPath(v.ns, v.step, v.name);
  if (v.lease.fd() < 0) return Status::Ok();  // an empty object maps nothing
  TC_ASSIGN_OR_RETURN(FileStat st, StatOpenFd(v.lease.fd(), "fstat the fd of " + what));
  if (st.ino != v.ino || st.ctime_ns != v.ctime_ns || st.mtime_ns != v.mtime_ns ||
      st.size != v.lease.size()) {
    return Corruption(what +
                      " changed while it was read: its step was dropped and its file recycled (or the file "
                      "was changed behind the agent); read it again");
  }
  return Status::Ok();
}

Status ObjectView::CopyTo(void* dst, size_t capacity) const {
  if (!impl_) return FailedPrecondition("ObjectView::CopyTo on an empty view (Client::Open did not fill it)");
  const size_t n = impl_->lease.size();
  if (capacity < n) {
    return InvalidArgument("destination for object " + ObjectPath(impl_->ns, impl_->step, impl_->name) +
                           " holds " + std::to_string(capacity) + " bytes but the object has " +
                           std::to_string(n));
  }
  const Impl& v = *impl_;
  return CheckObjectChecksum(v.ns, v.step, v.name, v.expected, CopyAndChecksum(dst, v.lease.data(), n));
}

}  // namespace tierckpt
