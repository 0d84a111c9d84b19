// Built only for the precompiled header that every unit test target reuses
// (tierckpt_test_pch in the top-level CMakeLists.txt, decision 86); the header
// list is there. An executable, as the tests are, so that the header is
// compiled with their flags; it does nothing.
int main() { return 0; }
