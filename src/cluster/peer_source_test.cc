// --peers: a hostfile, or the nodes of the Slurm job (slurm:PORT).
#include "cluster/peer_source.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "testing/temp_dir.h"

namespace tierckpt::cluster {
namespace {

struct Env {
  std::map<std::string, std::string> vars;
  std::function<const char*(const char*)> Get() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

TEST(PeerSourceTest, SlurmPeersAreTheJobsNodesAtThePortGiven) {
  Env env{{{"SLURM_JOB_NODELIST", "gpu[07-08],login1"}}};
  Result<Membership> m = LoadPeers("slurm:7100", env.Get());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 3u);
  ASSERT_NE(m->Find("gpu07"), nullptr);
  EXPECT_EQ(m->Find("gpu07")->address, "gpu07:7100");
  EXPECT_EQ(m->Find("gpu08")->address, "gpu08:7100");
  EXPECT_EQ(m->Find("login1")->address, "login1:7100");
}

TEST(PeerSourceTest, OlderSlurmsNodelistVariableIsReadToo) {
  Env env{{{"SLURM_NODELIST", "n[1-2]"}}};
  Result<Membership> m = LoadPeers("slurm:7100", env.Get());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->size(), 2u);
}

TEST(PeerSourceTest, SlurmOutsideAJobOrWithABadPortOrListIsAClearError) {
  Env none;
  Result<Membership> m = LoadPeers("slurm:7100", none.Get());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("SLURM_JOB_NODELIST"), std::string::npos) << m.status().ToString();
  EXPECT_NE(m.status().message().find("srun"), std::string::npos) << m.status().ToString();

  Env env{{{"SLURM_JOB_NODELIST", "n[1-2]"}}};
  for (std::string bad : {"slurm:", "slurm:0", "slurm:70000", "slurm:x"}) {
    Result<Membership> r = LoadPeers(bad, env.Get());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("slurm:7100"), std::string::npos) << r.status().ToString();
  }
  Env broken{{{"SLURM_JOB_NODELIST", "n[1-"}}};
  Result<Membership> r = LoadPeers("slurm:7100", broken.Get());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("SLURM_JOB_NODELIST"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("not closed"), std::string::npos) << r.status().ToString();
  Env bad_name{{{"SLURM_JOB_NODELIST", "n_[1-2]x!"}}};
  r = LoadPeers("slurm:7100", bad_name.Get());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
}

TEST(PeerSourceTest, AnythingElseIsAHostfile) {
  testing_util::TempDir dir;
  const std::string path = dir.path() + "/hosts";
  std::ofstream(path) << "n1 127.0.0.1:7100\nn2 127.0.0.2:7100\n";
  Env env{{{"SLURM_JOB_NODELIST", "other[1-5]"}}};
  Result<Membership> m = LoadPeers(path, env.Get());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->size(), 2u);
  EXPECT_NE(m->Find("n1"), nullptr);
  Result<Membership> missing = LoadPeers(dir.path() + "/none", env.Get());
  EXPECT_FALSE(missing.ok());
}

}  // namespace
}  // namespace tierckpt::cluster
