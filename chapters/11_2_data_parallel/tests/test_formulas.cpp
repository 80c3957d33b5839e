// Visible tests for the 11.2 formulas: what a ring all-reduce sends and how long it takes,
// checked by limits (N = 1, large N), by counting the ring's steps, and by invalid inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "11_2_data_parallel/formulas.hpp"

using namespace mgpu::data_parallel;

TEST_CASE("one rank sends nothing, in no messages, in no time") {
  CHECK(ring_all_reduce_bytes_per_rank(1, 1e9) == 0.0);
  CHECK(ring_all_reduce_messages_per_rank(1) == 0);
  CHECK(ring_all_reduce_seconds(1, 1e9, LinkModel{1e-5, 1e10}) == 0.0);
}

TEST_CASE("ring all-reduce sends 2(N-1)/N of the buffer: N-1 chunks of S/N, twice") {
  const double S = 12345678.0;
  for (std::int64_t n : {2, 3, 4, 8, 64, 1000}) {
    // Count the ring's steps instead of using the closed form: reduce-scatter then all-gather.
    const double chunk = S / static_cast<double>(n);
    const double counted = static_cast<double>(2 * (n - 1)) * chunk;
    const double got = ring_all_reduce_bytes_per_rank(n, S);
    CHECK(got == doctest::Approx(counted).epsilon(1e-12));
    CHECK(ring_all_reduce_messages_per_rank(n) == 2 * (n - 1));
  }
}

TEST_CASE("bytes per rank stay below twice the buffer and approach it as N grows") {
  const double S = 1e9;
  double previous = 0;
  for (std::int64_t n = 1; n <= 4096; n *= 2) {
    const double got = ring_all_reduce_bytes_per_rank(n, S);
    CHECK(got < 2 * S);
    CHECK(got >= previous);
    previous = got;
  }
  MESSAGE("N=4096: " << previous / S << " x the buffer");
  CHECK(previous / S > 1.99);
}

TEST_CASE("all-reduce time is latency times messages plus the chunk transfers") {
  const LinkModel link{5e-6, 25e9};
  for (std::int64_t n : {2, 4, 16}) {
    const double S = 64e6;
    const double with_latency = ring_all_reduce_seconds(n, S, link);
    const double bandwidth_only = ring_all_reduce_seconds(n, S, LinkModel{0, 25e9});
    CHECK(with_latency - bandwidth_only ==
          doctest::Approx(static_cast<double>(ring_all_reduce_messages_per_rank(n)) * 5e-6)
              .epsilon(1e-12));
    // With no latency, time is bytes sent over the link's bandwidth.
    CHECK(bandwidth_only ==
          doctest::Approx(ring_all_reduce_bytes_per_rank(n, S) / 25e9).epsilon(1e-12));
  }
}

TEST_CASE("large buffers take nearly the same time whatever N, small ones grow with N") {
  const LinkModel link{10e-6, 50e9};
  const double t8 = ring_all_reduce_seconds(8, 1e10, link);
  const double t512 = ring_all_reduce_seconds(512, 1e10, link);
  MESSAGE("1e10 B: N=8 " << t8 << " s, N=512 " << t512 << " s");
  CHECK(t512 / t8 < 1.2);
  CHECK(ring_all_reduce_seconds(512, 1e3, link) > 50 * ring_all_reduce_seconds(8, 1e3, link));
}

TEST_CASE("bus bandwidth is the algorithm bandwidth times 2(N-1)/N") {
  CHECK(all_reduce_bus_bandwidth(1, 1e11) == 0.0);
  CHECK(all_reduce_bus_bandwidth(2, 1e11) == doctest::Approx(1e11).epsilon(1e-12));
  CHECK(all_reduce_bus_bandwidth(8, 1e11) == doctest::Approx(1.75e11).epsilon(1e-12));
}

TEST_CASE("a data-parallel step sends the ring share of the whole gradient") {
  const double bytes = gradient_all_reduce_bytes_per_rank(8, 7e9, 2);
  CHECK(bytes == doctest::Approx(ring_all_reduce_bytes_per_rank(8, 14e9)).epsilon(1e-12));
  CHECK(gradient_all_reduce_bytes_per_rank(1, 7e9, 2) == 0.0);
}

TEST_CASE("invalid inputs are rejected with std::invalid_argument") {
  CHECK_THROWS_AS(ring_all_reduce_bytes_per_rank(0, 1e6), std::invalid_argument);
  CHECK_THROWS_AS(ring_all_reduce_bytes_per_rank(4, -1), std::invalid_argument);
  CHECK_THROWS_AS(ring_all_reduce_messages_per_rank(-3), std::invalid_argument);
  CHECK_THROWS_AS(ring_all_reduce_seconds(4, 1e6, LinkModel{-1e-6, 1e9}), std::invalid_argument);
  CHECK_THROWS_WITH_AS(ring_all_reduce_seconds(4, 1e6, LinkModel{1e-6, 0}),
                       doctest::Contains("bandwidth"), std::invalid_argument);
  CHECK_THROWS_AS(all_reduce_bus_bandwidth(0, 1e9), std::invalid_argument);
  CHECK_THROWS_AS(gradient_all_reduce_bytes_per_rank(8, -1, 2), std::invalid_argument);
}
