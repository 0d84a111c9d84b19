#include "peer/secret_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "os/files.h"
#include "testing/temp_dir.h"

namespace tierckpt::peer {
namespace {

constexpr uid_t kAgent = 1000;
constexpr uid_t kOther = 1001;

class SecretFileTest : public ::testing::Test {
 protected:
  // A file holding text with exactly `mode`, whatever the umask.
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomic(path, text, false).ok());
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }

  ::tierckpt::testing_util::TempDir tmp_{"tc_secret_file_test"};
  const std::string dir_ = tmp_.path();
};

TEST(SecretFileAccessTest, OwnerOnlyIsAccepted) {
  EXPECT_TRUE(CheckSecretFileAccess("/s", kAgent, 0600, kAgent).ok());
  EXPECT_TRUE(CheckSecretFileAccess("/s", kAgent, 0400, kAgent).ok());
  EXPECT_TRUE(CheckSecretFileAccess("/s", 0, 0600, kAgent).ok());  // root's, readable through a capability
  EXPECT_TRUE(CheckSecretFileAccess("/s", 0, 0400, 0).ok());
}

// Issue 42 item 6: a secret file every user could read was accepted silently.
TEST(SecretFileAccessTest, ReadableByOtherUsersIsRefusedNamingFileModeAndFix) {
  for (mode_t mode : {0644, 0604, 0640 | 0004, 0444, 0602}) {
    Status s = CheckSecretFileAccess("/etc/tierckpt/secret", kAgent, mode, kAgent);
    ASSERT_FALSE(s.ok()) << std::oct << mode;
    EXPECT_EQ(s.code(), Code::kPermissionDenied);
    EXPECT_NE(s.message().find("/etc/tierckpt/secret"), std::string::npos) << s.message();
    char octal[8];
    std::snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(mode));
    EXPECT_NE(s.message().find(std::string("mode ") + octal), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("every user of this machine"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("chmod 600 /etc/tierckpt/secret"), std::string::npos) << s.message();
  }
  // Root's file too: "other" is every user, whoever owns it.
  EXPECT_FALSE(CheckSecretFileAccess("/s", 0, 0644, kAgent).ok());
}

TEST(SecretFileAccessTest, GroupReadableOwnFileIsRefused) {
  Status s = CheckSecretFileAccess("/s", kAgent, 0640, kAgent);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_NE(s.message().find("mode 0640"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("its group can read"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("chmod 600 /s"), std::string::npos) << s.message();
  // An agent running as root reads root's file without the group bit: the
  // bit only lets others in.
  EXPECT_FALSE(CheckSecretFileAccess("/s", 0, 0640, 0).ok());
  EXPECT_FALSE(CheckSecretFileAccess("/s", 0, 0440, 0).ok());
}

// Decision 83: a Kubernetes Secret volume with fsGroup is root-owned, mode
// 0440, and the agent reads it through its group; root shares it on purpose.
TEST(SecretFileAccessTest, RootOwnedGroupReadableIsAccepted) {
  EXPECT_TRUE(CheckSecretFileAccess("/s", 0, 0440, kAgent).ok());
  EXPECT_TRUE(CheckSecretFileAccess("/s", 0, 0640, kAgent).ok());
}

TEST(SecretFileAccessTest, GroupWritableIsRefusedEvenForRoot) {
  for (uid_t owner : {static_cast<uid_t>(0), kAgent}) {
    Status s = CheckSecretFileAccess("/s", owner, 0660, kAgent);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("can replace"), std::string::npos) << s.message();
  }
}

TEST(SecretFileAccessTest, AnotherUsersFileIsRefused) {
  Status s = CheckSecretFileAccess("/s", kOther, 0400, kAgent);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_NE(s.message().find("uid 1001"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("uid 1000"), std::string::npos) << s.message();
}

TEST_F(SecretFileTest, LoadsAPrivateFileAndStripsTheLineEnding) {
  const std::string path = Write("secret", "0123456789abcdef-secret\r\n", 0600);
  Result<ClusterSecret> s = LoadSecretFile(path, ::geteuid());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->bytes(), "0123456789abcdef-secret");
}

TEST_F(SecretFileTest, LooseFileIsRefusedBeforeItIsRead) {
  const std::string path = Write("secret", "0123456789abcdef-secret\n", 0644);
  Result<ClusterSecret> s = LoadSecretFile(path, ::geteuid());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kPermissionDenied);
  EXPECT_NE(s.status().message().find(path + " (--peer-secret-file) has mode 0644"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("chmod 600 " + path), std::string::npos) << s.status().message();
}

// Kubernetes mounts a Secret as a chain of links: the target's mode counts.
TEST_F(SecretFileTest, FollowsSymbolicLinksToTheTarget) {
  const std::string target = Write("real", "0123456789abcdef-secret", 0400);
  const std::string link = dir_ + "/secret";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_TRUE(LoadSecretFile(link, ::geteuid()).ok());
  ASSERT_EQ(::chmod(target.c_str(), 0444), 0);
  Result<ClusterSecret> s = LoadSecretFile(link, ::geteuid());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(link + " (--peer-secret-file) has mode 0444"), std::string::npos)
      << s.status().message();
}

TEST_F(SecretFileTest, AFifoIsRefusedWithoutBlocking) {
  const std::string path = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  Result<ClusterSecret> s = LoadSecretFile(path, ::geteuid());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("not a regular file"), std::string::npos) << s.status().message();
}

TEST_F(SecretFileTest, MissingShortAndOversizedFilesNameThePath) {
  Result<ClusterSecret> missing = LoadSecretFile(dir_ + "/none", ::geteuid());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--peer-secret-file"), std::string::npos);
  EXPECT_NE(missing.status().message().find(dir_ + "/none"), std::string::npos);

  Result<ClusterSecret> shortish = LoadSecretFile(Write("short", "tiny\n", 0600), ::geteuid());
  ASSERT_FALSE(shortish.ok());
  EXPECT_EQ(shortish.status().code(), Code::kInvalidArgument);
  EXPECT_NE(shortish.status().message().find("--peer-secret-file " + dir_ + "/short"), std::string::npos)
      << shortish.status().message();

  Result<ClusterSecret> big = LoadSecretFile(Write("big", std::string(kMaxSecretBytes + 3, 'x'), 0600), ::geteuid());
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), Code::kResourceExhausted);
}

}  // namespace
}  // namespace tierckpt::peer
