// ReedSolomon (reed_solomon.h): every pattern of up to M lost pieces rebuilds
// byte for byte, for several shapes and lengths (odd ones, above ISA-L's
// vector widths and below); Update piece by piece equals Encode; too many
// losses and bad shapes are errors that say so.
#include "ec/reed_solomon.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace tierckpt::ec {
namespace {

using Piece = std::vector<uint8_t>;

std::vector<Piece> RandomPieces(uint32_t count, size_t len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Piece> out(count, Piece(len));
  for (Piece& p : out)
    for (uint8_t& b : p) b = static_cast<uint8_t>(rng());
  return out;
}

std::vector<const uint8_t*> ConstPtrs(const std::vector<Piece>& ps) {
  std::vector<const uint8_t*> out;
  for (const Piece& p : ps) out.push_back(p.data());
  return out;
}
std::vector<uint8_t*> Ptrs(std::vector<Piece>& ps) {
  std::vector<uint8_t*> out;
  for (Piece& p : ps) out.push_back(p.data());
  return out;
}

// data + parity of a k+m code over `len` bytes.
std::vector<Piece> Encoded(const ReedSolomon& rs, size_t len, uint32_t seed) {
  std::vector<Piece> all = RandomPieces(rs.k(), len, seed);
  std::vector<Piece> parity(rs.m(), Piece(len));
  EXPECT_TRUE(rs.Encode(ConstPtrs(all), Ptrs(parity), len).ok());
  all.insert(all.end(), parity.begin(), parity.end());
  return all;
}

// Loses the pieces whose bit is set in `lost`, rebuilds them, compares.
void LoseAndRebuild(const ReedSolomon& rs, const std::vector<Piece>& all, uint32_t lost, size_t len) {
  const uint32_t n = rs.k() + rs.m();
  std::vector<const uint8_t*> pieces(n);
  std::vector<Piece> rebuilt(n);
  std::vector<uint8_t*> out(n, nullptr);
  for (uint32_t i = 0; i < n; ++i) {
    if (lost & (1u << i)) {
      rebuilt[i].assign(len, 0xAA);
      out[i] = rebuilt[i].data();
    } else {
      pieces[i] = all[i].data();
    }
  }
  Status st = rs.Reconstruct(pieces, out, len);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (uint32_t i = 0; i < n; ++i) {
    if (lost & (1u << i)) {
      EXPECT_EQ(rebuilt[i], all[i]) << "piece " << i << ", lost mask " << lost << ", len " << len;
    }
  }
}

TEST(ReedSolomonTest, EveryPatternOfUpToMLostPiecesIsRebuiltByteForByte) {
  for (auto [k, m] : std::vector<std::pair<uint32_t, uint32_t>>{{4, 2}, {1, 1}, {3, 1}, {6, 3}, {2, 4}}) {
    Result<ReedSolomon> rs = ReedSolomon::Create(k, m);
    ASSERT_TRUE(rs.ok()) << rs.status().ToString();
    for (size_t len : {size_t{1}, size_t{15}, size_t{64}, size_t{4097}, size_t{70001}}) {
      const std::vector<Piece> all = Encoded(*rs, len, k * 100 + m + static_cast<uint32_t>(len));
      const uint32_t n = k + m;
      for (uint32_t lost = 1; lost < (1u << n); ++lost) {
        if (static_cast<uint32_t>(__builtin_popcount(lost)) > m) continue;
        LoseAndRebuild(*rs, all, lost, len);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(ReedSolomonTest, TheDataPiecesAreStoredAsTheyAreAndParityIsNotACopy) {
  Result<ReedSolomon> rs = ReedSolomon::Create(4, 2);
  ASSERT_TRUE(rs.ok());
  const std::vector<Piece> all = Encoded(*rs, 1000, 7);
  EXPECT_NE(all[4], all[5]);  // two parity pieces, two different equations
  for (uint32_t i = 0; i < 4; ++i) EXPECT_NE(all[4], all[i]);
}

TEST(ReedSolomonTest, UpdatingParityOnePieceAtATimeEqualsEncodingAll) {
  Result<ReedSolomon> rs = ReedSolomon::Create(4, 2);
  ASSERT_TRUE(rs.ok());
  const size_t len = 123457;
  const std::vector<Piece> all = Encoded(*rs, len, 11);
  std::vector<Piece> parity(2, Piece(len, 0));
  for (uint32_t i : {2u, 0u, 3u, 1u}) {  // in any order, as parts arrive from their nodes
    ASSERT_TRUE(rs->Update(i, all[i].data(), Ptrs(parity), len).ok());
  }
  EXPECT_EQ(parity[0], all[4]);
  EXPECT_EQ(parity[1], all[5]);
  // Adding a piece twice cancels it: the caller must count what it added.
  ASSERT_TRUE(rs->Update(1, all[1].data(), Ptrs(parity), len).ok());
  EXPECT_NE(parity[0], all[4]);
}

TEST(ReedSolomonTest, AShortPieceEncodesAsIfZeroPadded) {
  Result<ReedSolomon> rs = ReedSolomon::Create(3, 2);
  ASSERT_TRUE(rs.ok());
  const size_t len = 5000;
  std::vector<Piece> data = RandomPieces(3, len, 5);
  ZeroTail(data[1].data(), 1234, len);  // a part of 1,234 bytes in a group of 5,000
  std::vector<Piece> parity(2, Piece(len, 0));
  for (uint32_t i = 0; i < 3; ++i) {
    const size_t n = i == 1 ? 1234 : len;  // fold only the short part's own bytes
    ASSERT_TRUE(rs->Update(i, data[i].data(), std::vector<uint8_t*>{parity[0].data(), parity[1].data()}, n).ok());
  }
  std::vector<Piece> whole(2, Piece(len));
  ASSERT_TRUE(rs->Encode(ConstPtrs(data), Ptrs(whole), len).ok());
  EXPECT_EQ(parity, whole);
}

TEST(ReedSolomonTest, MoreThanMLostIsAnErrorNamingTheCounts) {
  Result<ReedSolomon> rs = ReedSolomon::Create(4, 2);
  ASSERT_TRUE(rs.ok());
  std::vector<Piece> all = Encoded(*rs, 100, 3);
  std::vector<const uint8_t*> pieces = ConstPtrs(all);
  std::vector<Piece> rebuilt(6, Piece(100));
  std::vector<uint8_t*> out(6, nullptr);
  for (uint32_t i : {0u, 2u, 5u}) {
    pieces[i] = nullptr;
    out[i] = rebuilt[i].data();
  }
  Status st = rs->Reconstruct(pieces, out, 100);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("3 of 6 pieces survive"), std::string::npos) << st.ToString();
}

TEST(ReedSolomonTest, BadShapesAreInvalidArguments) {
  EXPECT_EQ(ReedSolomon::Create(0, 2).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ReedSolomon::Create(4, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ReedSolomon::Create(200, 57).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(ReedSolomon::Create(200, 56).ok());
  Result<ReedSolomon> rs = ReedSolomon::Create(4, 2);
  ASSERT_TRUE(rs.ok());
  std::vector<Piece> all = Encoded(*rs, 10, 1);
  std::vector<Piece> parity(2, Piece(10));
  const std::vector<const uint8_t*> every = ConstPtrs(all);
  const std::vector<const uint8_t*> three(every.begin(), every.begin() + 3);
  EXPECT_EQ(rs->Encode(three, Ptrs(parity), 10).code(), Code::kInvalidArgument);
  EXPECT_EQ(rs->Update(4, all[0].data(), Ptrs(parity), 10).code(), Code::kInvalidArgument);
  std::vector<const uint8_t*> pieces = ConstPtrs(all);
  std::vector<uint8_t*> out(6, nullptr);
  out[0] = parity[0].data();  // piece 0 survives: asking for it is a caller's mistake
  EXPECT_EQ(rs->Reconstruct(pieces, out, 10).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace tierckpt::ec
