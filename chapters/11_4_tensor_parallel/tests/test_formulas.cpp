// Visible tests for the 11.4 formulas: each rank holds 1/t of every matrix, the shares add up
// to the unsplit layer, and a block's all-reduce traffic follows the ring and pass counts.
#include <doctest/doctest.h>

#include <stdexcept>

#include "11_4_tensor_parallel/formulas.hpp"

using namespace mgpu::tensor_parallel;

TEST_CASE("t = 1 holds the whole FFN and the whole attention block") {
  const std::int64_t h = 1024;
  CHECK(ffn_params_per_rank(h, 4 * h, 1) == doctest::Approx(8.0 * h * h));     // h x 4h and 4h x h
  CHECK(attention_params_per_rank(h, 16, 1) == doctest::Approx(4.0 * h * h));  // Q, K, V, O
}

TEST_CASE("the t shares of an FFN add up to the unsplit FFN") {
  for (std::int64_t t : {1, 2, 4, 8}) {
    const double whole = ffn_params_per_rank(4096, 16384, 1);
    CHECK(ffn_params_per_rank(4096, 16384, t) * static_cast<double>(t) == doctest::Approx(whole));
  }
}

TEST_CASE("the t shares of an attention block add up to the unsplit block") {
  for (std::int64_t t : {1, 2, 4, 8, 32}) {
    const double whole = attention_params_per_rank(4096, 32, 1);
    CHECK(attention_params_per_rank(4096, 32, t) * static_cast<double>(t) ==
          doctest::Approx(whole));
  }
}

TEST_CASE("a block is its attention, its FFN and its replicated layer norms: 12 h^2 / t + 4h") {
  const std::int64_t h = 2048;
  for (std::int64_t t : {1, 2, 8}) {
    // Exact: every term is an integer well below 2^53.
    CHECK(block_params_per_rank(h, 16, 4 * h, t) ==
          attention_params_per_rank(h, 16, t) + ffn_params_per_rank(h, 4 * h, t) + 4.0 * h);
    CHECK(block_params_per_rank(h, 16, 4 * h, t) ==
          12.0 * h * h / static_cast<double>(t) + 4.0 * h);
  }
  CHECK(block_params_per_rank(2048, 16, 8192, 8) == 6299648.0);  // the header's example
}

TEST_CASE("a block all-reduces twice forward and twice backward") {
  CHECK(all_reduces_per_block(Pass::forward) == 2);
  CHECK(all_reduces_per_block(Pass::backward) == 2);
  CHECK(all_reduces_per_block(Pass::both) ==
        all_reduces_per_block(Pass::forward) + all_reduces_per_block(Pass::backward));
}

TEST_CASE("each all-reduce carries the block's activation, s*b*h elements") {
  const mgpu::TransformerShape shape{2048, 4, 8192, 64, 1};
  CHECK(all_reduce_payload_bytes(shape, 2) == doctest::Approx(2048.0 * 4 * 8192 * 2));
}

TEST_CASE("bytes sent per rank follow the ring: 2(t-1)/t of each payload, none for t = 1") {
  const mgpu::TransformerShape shape{1024, 2, 4096, 32, 1};
  const double payload = all_reduce_payload_bytes(shape, 2);
  CHECK(block_bytes_sent_per_rank(shape, 1, 2, Pass::both) == 0.0);
  for (std::int64_t t : {2, 4, 8}) {
    const double ring = 2.0 * static_cast<double>(t - 1) / static_cast<double>(t);
    CHECK(block_bytes_sent_per_rank(shape, t, 2, Pass::forward) ==
          doctest::Approx(2 * ring * payload));
    CHECK(block_bytes_sent_per_rank(shape, t, 2, Pass::both) ==
          doctest::Approx(2 * block_bytes_sent_per_rank(shape, t, 2, Pass::forward)));
  }
}

TEST_CASE("per-rank traffic does not shrink as t grows, unlike per-rank weights") {
  const mgpu::TransformerShape shape{1024, 2, 4096, 32, 1};
  double previous = 0;
  for (std::int64_t t : {1, 2, 4, 8, 16}) {
    const double sent = block_bytes_sent_per_rank(shape, t, 2, Pass::both);
    CHECK(sent >= previous);
    previous = sent;
  }
}

TEST_CASE("invalid splits are rejected with std::invalid_argument") {
  CHECK_THROWS_WITH_AS(ffn_params_per_rank(1024, 4096, 3), doctest::Contains("ffn_hidden"),
                       std::invalid_argument);
  CHECK_THROWS_AS(ffn_params_per_rank(1024, 4096, 0), std::invalid_argument);
  CHECK_THROWS_AS(ffn_params_per_rank(0, 4096, 1), std::invalid_argument);
  CHECK_THROWS_WITH_AS(attention_params_per_rank(1024, 32, 3), doctest::Contains("heads"),
                       std::invalid_argument);
  CHECK_THROWS_AS(attention_params_per_rank(1000, 48, 1),
                  std::invalid_argument);  // 48 does not divide 1000
  CHECK_THROWS_AS(all_reduce_payload_bytes({0, 1, 1024, 16, 1}, 2), std::invalid_argument);
  CHECK_THROWS_AS(all_reduce_payload_bytes({128, 1, 1024, 16, 1}, 0), std::invalid_argument);
  CHECK_THROWS_AS(block_bytes_sent_per_rank({128, 1, 1024, 16, 1}, 0, 2, Pass::both),
                  std::invalid_argument);
}
