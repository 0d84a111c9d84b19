// testing/temp_dir.h — a temporary directory for unit tests, removed (and
// checked to be removable) when the test ends. Test-only; gtest required.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <string_view>

#include "os/files.h"

namespace tierckpt::testing_util {

class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "tc_test") {
    std::string tmpl = "/tmp/" + std::string(prefix) + ".XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    if (made != nullptr) path_ = made;
  }
  ~TempDir() {
    if (!path_.empty()) {
      EXPECT_TRUE(RemoveTree(path_).ok());
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Sub(std::string_view rel) const { return JoinPath(path_, rel); }

 private:
  std::string path_;
};

}  // namespace tierckpt::testing_util
