// The CoordinationStore contract on the in-memory store (the same sequence runs on the
// DynamoDB store against dynalite in tests/integration/leases).
#include "coordination/in_memory_coordination_store.h"

#include <gtest/gtest.h>

#include "support/coordination_store_contract.h"

namespace kcl::coordination {
namespace {

TEST(InMemoryCoordinationStoreTest, Contract) {
  InMemoryCoordinationStore store;
  testing::check_coordination_store_contract(store);
}

}  // namespace
}  // namespace kcl::coordination
