#include "kcl/record.h"

#include <utility>

namespace kcl {

Record::Record(Fields fields) {
  auto own = std::make_shared<Fields>(std::move(fields));
  own_ = own.get();
  point_at(*own);
  approximate_arrival_timestamp_ = own->approximate_arrival_timestamp;
  sub_sequence_number_ = own->sub_sequence_number;
  aggregated_ = own->aggregated;
  owner_ = std::move(own);
}

Record::Record(Record&& other) noexcept
    : owner_(std::move(other.owner_)),
      own_(std::exchange(other.own_, nullptr)),
      shard_id_(std::exchange(other.shard_id_, {})),
      sequence_number_(std::exchange(other.sequence_number_, {})),
      partition_key_(std::exchange(other.partition_key_, {})),
      explicit_hash_key_(std::exchange(other.explicit_hash_key_, {})),
      data_(std::exchange(other.data_, {})),
      approximate_arrival_timestamp_(std::exchange(other.approximate_arrival_timestamp_, {})),
      sub_sequence_number_(std::exchange(other.sub_sequence_number_, 0)),
      aggregated_(std::exchange(other.aggregated_, false)) {}

Record& Record::operator=(Record&& other) noexcept {
  if (this != &other) {
    owner_ = std::move(other.owner_);
    own_ = std::exchange(other.own_, nullptr);
    shard_id_ = std::exchange(other.shard_id_, {});
    sequence_number_ = std::exchange(other.sequence_number_, {});
    partition_key_ = std::exchange(other.partition_key_, {});
    explicit_hash_key_ = std::exchange(other.explicit_hash_key_, {});
    data_ = std::exchange(other.data_, {});
    approximate_arrival_timestamp_ = std::exchange(other.approximate_arrival_timestamp_, {});
    sub_sequence_number_ = std::exchange(other.sub_sequence_number_, 0);
    aggregated_ = std::exchange(other.aggregated_, false);
  }
  return *this;
}

Record::Views Record::views() const noexcept {
  Views v;
  v.shard_id = shard_id_;
  v.sequence_number = sequence_number_;
  v.sub_sequence_number = sub_sequence_number_;
  v.aggregated = aggregated_;
  v.partition_key = partition_key_;
  v.explicit_hash_key = explicit_hash_key_;
  v.approximate_arrival_timestamp = approximate_arrival_timestamp_;
  v.data = data_;
  return v;
}

Record::Fields Record::fields() const {
  Fields f;
  f.shard_id.assign(shard_id_);
  f.sequence_number.assign(sequence_number_);
  f.sub_sequence_number = sub_sequence_number_;
  f.aggregated = aggregated_;
  f.partition_key.assign(partition_key_);
  f.explicit_hash_key.assign(explicit_hash_key_);
  f.approximate_arrival_timestamp = approximate_arrival_timestamp_;
  f.data.assign(data_);
  return f;
}

void Record::point_at(const Fields& f) noexcept {
  shard_id_ = f.shard_id;
  sequence_number_ = f.sequence_number;
  partition_key_ = f.partition_key;
  explicit_hash_key_ = f.explicit_hash_key;
  data_ = f.data;
}

void Record::set(std::string Fields::*field, std::string_view value) {
  // Writing in place is safe only into storage this record made and no copy shares: a copy
  // made before (use_count() > 1) must keep its contents. Otherwise copy everything once.
  // (use_count() cannot grow behind our back: copying this record means accessing it.)
  // `value` may point into the bytes being replaced: they stay alive until the end.
  std::shared_ptr<const void> previous;
  if (own_ == nullptr || owner_.use_count() != 1) {
    auto own = std::make_shared<Fields>(fields());
    own_ = own.get();
    previous = std::exchange(owner_, std::move(own));
  }
  (own_->*field).assign(value);
  point_at(*own_);
}

bool operator==(const Record& a, const Record& b) noexcept {
  return a.shard_id_ == b.shard_id_ && a.sequence_number_ == b.sequence_number_ &&
         a.sub_sequence_number_ == b.sub_sequence_number_ && a.aggregated_ == b.aggregated_ &&
         a.partition_key_ == b.partition_key_ && a.explicit_hash_key_ == b.explicit_hash_key_ &&
         a.approximate_arrival_timestamp_ == b.approximate_arrival_timestamp_ && a.data_ == b.data_;
}

}  // namespace kcl
