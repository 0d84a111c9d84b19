#include "peer/auth.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "testing/golden.h"

namespace tierckpt::peer {
namespace {

using ::tierckpt::testing_util::Hex;

ClusterSecret MakeSecret(std::string_view text) {
  auto s = ClusterSecret::FromBytes(text);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : ClusterSecret();
}

TEST(AuthTest, HmacSha256MatchesRfc4231) {
  // RFC 4231, test case 2.
  EXPECT_EQ(Hex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(AuthTest, SecretsNeedSixteenToFourKiBytes) {
  EXPECT_EQ(ClusterSecret::FromBytes("short").status().code(), Code::kInvalidArgument);
  EXPECT_NE(ClusterSecret::FromBytes("short").status().message().find("/dev/urandom"), std::string::npos);
  EXPECT_EQ(ClusterSecret::FromBytes(std::string(kMaxSecretBytes + 1, 's')).status().code(),
            Code::kInvalidArgument);
  ClusterSecret s = MakeSecret(std::string(kMinSecretBytes, '\0'));  // any bytes
  EXPECT_EQ(s.size(), kMinSecretBytes);
  ClusterSecret copy = s;
  ClusterSecret moved = std::move(s);
  EXPECT_EQ(copy.bytes(), moved.bytes());
  EXPECT_TRUE(s.empty());  // NOLINT: a moved-from secret is wiped
  EXPECT_TRUE(ClusterSecret().empty());
}

TEST(AuthTest, NoncesAreFreshAndFullLength) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto n = MakeNonce();
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(n->size(), kNonceSize);
    seen.insert(*n);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(AuthTest, ProofBindsEveryInput) {
  ClusterSecret secret = MakeSecret("0123456789abcdef-secret");
  std::string nc(kNonceSize, 'c'), ns(kNonceSize, 's');
  ProofInput base{Role::kClient, "node-a", "node-b", nc, ns, 1};
  std::string mac = ComputeProof(secret, base);
  EXPECT_EQ(mac.size(), kMacSize);
  EXPECT_TRUE(VerifyProof(secret, base, mac));

  std::string other_nonce(kNonceSize, 'x');
  std::vector<ProofInput> changed = {
      {Role::kServer, "node-a", "node-b", nc, ns, 1},  // reflected as the other role
      {Role::kClient, "node-b", "node-a", nc, ns, 1},  // node ids swapped
      {Role::kClient, "node-a", "node-b", other_nonce, ns, 1},
      {Role::kClient, "node-a", "node-b", nc, other_nonce, 1},  // replayed on another connection
      {Role::kClient, "node-a", "node-b", nc, ns, 2},
  };
  for (const ProofInput& in : changed) EXPECT_FALSE(VerifyProof(secret, in, mac));
  EXPECT_FALSE(VerifyProof(MakeSecret("another-secret-0123456789"), base, mac));
  std::string flipped = mac;
  flipped[31] ^= 1;
  EXPECT_FALSE(VerifyProof(secret, base, flipped));
  EXPECT_FALSE(VerifyProof(secret, base, ""));
  EXPECT_FALSE(VerifyProof(secret, base, mac.substr(0, 16)));
  EXPECT_FALSE(VerifyProof(ClusterSecret(), base, mac));
}

}  // namespace
}  // namespace tierckpt::peer
