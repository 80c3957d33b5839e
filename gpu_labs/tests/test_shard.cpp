// Host tests of the labs' index maths: ring chunks, padded ZeRO shards, busbw factors.
#include "common/shard.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

using namespace mgpu::gpu;

TEST_CASE("chunk_range tiles 0..total in order with sizes differing by at most one") {
  for (std::size_t total : {0u, 1u, 5u, 7u, 64u, 1000u}) {
    for (int parts : {1, 2, 3, 7, 8}) {
      std::size_t next = 0, smallest = total + 1, largest = 0;
      for (int i = 0; i < parts; ++i) {
        const mgpu::Chunk r = chunk_range(total, parts, i);
        CHECK(r.offset == next);
        next = r.offset + r.count;
        smallest = std::min(smallest, r.count);
        largest = std::max(largest, r.count);
      }
      CHECK(next == total);
      CHECK(largest - smallest <= 1);
      CHECK(chunk_range(total, parts, 0).count == largest);  // the ring's scratch size
    }
  }
}

TEST_CASE("chunk_range rejects a bad split with a message") {
  CHECK_THROWS_AS(chunk_range(10, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(chunk_range(10, 4, 4), std::out_of_range);
  CHECK_THROWS_AS(chunk_range(10, 4, -1), std::out_of_range);
}

TEST_CASE("padded shards cover every element once and pad only the tail") {
  for (std::size_t total : {1u, 10u, 4096u, 4099u}) {
    for (int parts : {1, 3, 4, 8}) {
      const std::size_t s = padded_shard(total, parts);
      CHECK(s * static_cast<std::size_t>(parts) >= total);
      CHECK(s * static_cast<std::size_t>(parts) < total + static_cast<std::size_t>(parts));
      std::size_t covered = 0;
      for (int i = 0; i < parts; ++i) {
        const mgpu::Chunk r = padded_shard_range(total, parts, i);
        if (r.count > 0) CHECK(r.offset == s * static_cast<std::size_t>(i));
        covered += r.count;
      }
      CHECK(covered == total);
    }
  }
}

TEST_CASE("bus bandwidth factors follow nccl-tests") {
  CHECK(busbw_factor("all_reduce", 8) == doctest::Approx(2.0 * 7 / 8));
  CHECK(busbw_factor("all_gather", 8) == doctest::Approx(7.0 / 8));
  CHECK(busbw_factor("reduce_scatter", 4) == doctest::Approx(0.75));
  CHECK(busbw_factor("all_reduce", 1) == 0.0);
  CHECK_THROWS_AS(busbw_factor("broadcast_typo", 2), std::invalid_argument);
}

TEST_CASE("ZeRO-3 state is 16 bytes per parameter divided by the ranks") {
  CHECK(zero3_state_bytes(1e9, 1) == doctest::Approx(16e9));
  CHECK(zero3_state_bytes(70e9, 64) == doctest::Approx(16.0 * 70e9 / 64));
}
