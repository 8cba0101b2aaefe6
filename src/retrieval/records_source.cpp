#include "retrieval/records_source.h"

#include <utility>

namespace kcl::retrieval {

base::CapacityRecycler<std::vector<kcl::Record>>& record_vector_recycler() {
  // Never destroyed: batches may outlive static destructors.
  static auto* recycler = new base::CapacityRecycler<std::vector<kcl::Record>>(8, 16 * 1024 * 1024);
  return *recycler;
}

FetchedBatch::~FetchedBatch() { record_vector_recycler().give(std::move(records)); }

}  // namespace kcl::retrieval
