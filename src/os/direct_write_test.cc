#include "os/direct_write.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "os/files.h"
#include "testing/page_cache.h"
#include "testing/temp_dir.h"

namespace tierckpt {
namespace {

using testing_util::CachedPagesBeforeTheLast;
using testing_util::HasSeparatePageCache;
using testing_util::TakesDirectIo;
using testing_util::TempDir;

// A page-aligned buffer of size bytes holding a pattern that differs every byte.
struct Aligned {
  explicit Aligned(size_t n) : size(n) {
    EXPECT_EQ(::posix_memalign(&data, kDirectAlignment, std::max<size_t>(n + 1, 1)), 0);
    auto* p = static_cast<uint8_t*>(data);
    for (size_t i = 0; i <= n; ++i) p[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  }
  ~Aligned() { std::free(data); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data); }
  void* data = nullptr;
  size_t size;
};

std::string Written(const TempDir& dir, const std::string& name, const void* data, size_t size, bool* direct) {
  const std::string path = dir.Sub(name);
  Result<UniqueFd> fd = OpenFile(path, O_CREAT | O_TRUNC | O_WRONLY);
  EXPECT_TRUE(fd.ok());
  Result<bool> wrote = WriteBypassingCache(fd->get(), data, size, path);
  EXPECT_TRUE(wrote.ok()) << wrote.status().ToString();
  *direct = wrote.ok() && *wrote;
  // The fd's flags are back as they were: O_DIRECT cleared.
  EXPECT_EQ(::fcntl(fd->get(), F_GETFL) & O_DIRECT, 0);
  Result<std::string> back = ReadFileToString(path, size + 1);
  EXPECT_TRUE(back.ok());
  return back.ok() ? *back : std::string();
}

TEST(DirectWriteTest, EverySizeWritesTheSameBytesAndTheBodyBypassesTheCacheWhereItCan) {
  TempDir dir;
  const bool takes = TakesDirectIo(dir.path());
  for (size_t size : {size_t{0}, size_t{1}, kDirectAlignment - 1, kDirectAlignment, kDirectAlignment + 1,
                      (size_t{3} << 20) + 123, (size_t{64} << 20) + kDirectAlignment + 5}) {
    Aligned buf(size);
    bool direct = false;
    std::string back = Written(dir, "f" + std::to_string(size), buf.data, size, &direct);
    ASSERT_EQ(back.size(), size);
    EXPECT_EQ(back, std::string(reinterpret_cast<const char*>(buf.bytes()), size)) << size;
    EXPECT_EQ(direct, takes && size >= kDirectAlignment) << size;
  }
}

TEST(DirectWriteTest, AnUnalignedBufferIsWrittenBuffered) {
  TempDir dir;
  Aligned buf((size_t{1} << 20) + 1);
  bool direct = true;
  std::string back = Written(dir, "u", buf.bytes() + 1, size_t{1} << 20, &direct);
  EXPECT_FALSE(direct);
  EXPECT_EQ(back, std::string(reinterpret_cast<const char*>(buf.bytes()) + 1, size_t{1} << 20));
}

TEST(DirectWriteTest, TheBodyLeavesNoPagesInTheCache) {
  TempDir dir;
  if (!HasSeparatePageCache(dir.path())) {
    GTEST_SKIP() << dir.path() << " is tmpfs (its files are the page cache) or takes no O_DIRECT";
  }
  const size_t size = (size_t{16} << 20) + 100;
  Aligned buf(size);
  Result<UniqueFd> fd = OpenFile(dir.Sub("c"), O_CREAT | O_TRUNC | O_RDWR);
  ASSERT_TRUE(fd.ok());
  Result<bool> wrote = WriteBypassingCache(fd->get(), buf.data, size, "c");
  ASSERT_TRUE(wrote.ok() && *wrote);
  // Looked at before anything reads the file: a buffered write leaves every page cached (dirty).
  EXPECT_EQ(CachedPagesBeforeTheLast(fd->get(), size), 0) << "pages of the body in the page cache";
}

TEST(DirectWriteTest, AFailedWriteNamesWhatAndLeavesTheFlagsAlone) {
  TempDir dir;
  const std::string path = dir.Sub("ro");
  ASSERT_TRUE(WriteFileAtomic(path, "x", false).ok());
  Result<UniqueFd> fd = OpenFile(path, O_RDONLY);
  ASSERT_TRUE(fd.ok());
  Aligned buf(size_t{1} << 20);
  Result<bool> wrote = WriteBypassingCache(fd->get(), buf.data, buf.size, "the test's object");
  ASSERT_FALSE(wrote.ok());
  EXPECT_NE(wrote.status().message().find("the test's object"), std::string::npos) << wrote.status().ToString();
  EXPECT_EQ(::fcntl(fd->get(), F_GETFL) & O_DIRECT, 0);
}

}  // namespace
}  // namespace tierckpt
