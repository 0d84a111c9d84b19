#include "client/sweeper.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "os/files.h"

namespace tierckpt::client {
namespace {

TEST(SweeperTest, ReleasesMappingsOfDeletedFilesWithoutCalls) {
  std::string tmpl = "/tmp/tc_sweeper_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string path = tmpl + "/seg";
  {
    auto fd = OpenFile(path, O_CREAT | O_RDWR);
    ASSERT_TRUE(fd.ok());
    ASSERT_EQ(::ftruncate(fd->get(), 4096), 0);
  }
  auto cache = std::make_shared<MappingCache>(MappingCache::Options{});
  auto fd = OpenFile(path, O_RDWR);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(cache->Acquire(std::move(fd).value(), 4096, Mapping::Access::kReadWrite, "seg").ok());
  {
    Sweeper sweeper(cache, std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(cache->stats().entries, 1u);  // still linked: kept
    ASSERT_EQ(::unlink(path.c_str()), 0);
    for (int i = 0; i < 400 && cache->stats().entries != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(cache->stats().entries, 0u);
  }  // joins promptly
  ASSERT_TRUE(RemoveTree(tmpl).ok());
}

}  // namespace
}  // namespace tierckpt::client
