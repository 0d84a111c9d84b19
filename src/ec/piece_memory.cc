// piece_memory.cc — see piece_memory.h.
#include "ec/piece_memory.h"

#include <new>
#include <string_view>
#include <vector>

#include "os/beneath.h"
#include "os/files.h"

namespace tierckpt::ec {
namespace {

class HeapPieceMemory final : public PieceMemory {
 public:
  Status Resize(uint64_t length) override {
    if (length > bytes_.max_size()) return ResourceExhausted("a parity piece of " + std::to_string(length) + " bytes");
    try {
      bytes_.resize(static_cast<size_t>(length));  // grows zero-filled
    } catch (const std::bad_alloc&) {
      return ResourceExhausted("no memory for a parity piece of " + std::to_string(length) + " bytes");
    }
    return Status::Ok();
  }
  uint8_t* data() override { return bytes_.empty() ? nullptr : bytes_.data(); }
  uint64_t size() const override { return bytes_.size(); }

  Status Publish(int dir_fd, const std::string& name, const std::string& path) override {
    const std::string_view view(reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
    TC_RETURN_IF_ERROR(WriteFileViaAt(dir_fd, name + ".tmp", name, 0600, /*sync_data=*/false,
                                      /*exclusive=*/false, DirName(path),
                                      [&](int fd) { return PwriteAll(fd, view.data(), view.size(), 0, path); }));
    std::vector<uint8_t>().swap(bytes_);
    return Status::Ok();
  }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace

std::unique_ptr<PieceMemory> MakeHeapPieceMemory() { return std::make_unique<HeapPieceMemory>(); }

}  // namespace tierckpt::ec
