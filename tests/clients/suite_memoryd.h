// SuiteMemoryd: a googletest fixture base with one real memoryd (a
// TestMemoryd) for the whole test suite: starting one per test would only
// repeat the same start-up. SetUp fails each test when it did not start.
#ifndef MEMORYD_TESTS_CLIENTS_SUITE_MEMORYD_H
#define MEMORYD_TESTS_CLIENTS_SUITE_MEMORYD_H

#include <gtest/gtest.h>

#include "tests/clients/client_test_support.h"

namespace client_test {

class SuiteMemoryd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestMemoryd(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ok()) << server_->error(); }

  inline static TestMemoryd* server_ = nullptr;
};

}  // namespace client_test

#endif
