// Not built: tc_common's ctest "ThreadSafetyAnalysisRejectsUnguardedAccess"
// compiles it with clang -Wthread-safety -Werror and expects it to fail, so
// the check of every GUARDED_BY and REQUIRES in the tree is known to be on.
#include "common/mutex.h"

namespace tierckpt {

class Account {
 public:
  void Deposit(int amount) { balance_ += amount; }  // mu_ not held
  void AddLocked(int amount) REQUIRES(mu_) { balance_ += amount; }
  void Add(int amount) { AddLocked(amount); }  // mu_ not held

 private:
  Mutex mu_;
  int balance_ GUARDED_BY(mu_) = 0;
};

void Use() {
  Account a;
  a.Deposit(1);
  a.Add(2);
}

}  // namespace tierckpt
