// 11.2 visible tests of the ring: the reduce-scatter on its own (the chunk each rank owns against
// a naive sum, N-1 messages), then the all-reduce: sums against a naive sum, for 1 to 8 ranks and
// lengths that do not divide evenly; bytes and messages per rank against 2(N-1)/N and 2(N-1).
// A wrong buffer is reported once per run (mgpu_test's comparison: its rank, the first and the
// worst wrong element with its ring chunk, and the likely cause), and a loop over many runs stops
// at the first that fails, so a wrong ring reads in a screenful.
#include <doctest/doctest.h>
#include <mgpu_test/compare.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "11_2_data_parallel/formulas.hpp"
#include "11_2_data_parallel/ring_all_reduce.hpp"
#include "mgpu/model/rng.hpp"

using namespace mgpu;
using namespace mgpu::data_parallel;

namespace {

// Lengths that catch off-by-one chunking: empty, shorter than the ring, one short of it, primes.
std::vector<std::size_t> awkward_lengths(int n) {
  std::vector<std::size_t> lengths = {0,
                                      1,
                                      static_cast<std::size_t>(n - 1),
                                      static_cast<std::size_t>(n),
                                      static_cast<std::size_t>(n + 1),
                                      7,
                                      13,
                                      97,
                                      1009};
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  return lengths;
}

// Rank r's input: small integers, so every order of summation gives the exact same float.
float integer_value(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((rank * 31 + i * 7) % 17) - 8);
}

// The exact sum of element i over n ranks, added in rank order.
float naive_sum(int n, std::size_t i) {
  float sum = 0.0f;
  for (int q = 0; q < n; ++q) sum += integer_value(q, i);
  return sum;
}

// The naive sums of every element of a buffer of `length`.
std::vector<float> naive_sums(int n, std::size_t length) {
  std::vector<float> sums(length);
  for (std::size_t i = 0; i < length; ++i) sums[i] = naive_sum(n, i);
  return sums;
}

// "2 ranks, 7 elements": a run, for labels.
std::string run_name(int n, std::size_t length) {
  return std::to_string(n) + (n == 1 ? " rank, " : " ranks, ") + std::to_string(length) +
         " elements";
}

// Runs `ring` on every rank of `cluster` (n ranks), each on its integer values of `length`;
// returns what each rank's buffer holds after (index = rank).
using RingOp = void (*)(Comm&, std::span<float>, MemoryLedger&);
std::vector<std::vector<float>> run_on_integers(Cluster& cluster, int n, std::size_t length,
                                                RingOp ring) {
  std::vector<std::vector<float>> result(static_cast<std::size_t>(n));
  cluster.run([&](Rank& r) {
    std::vector<float> data(length);
    for (std::size_t i = 0; i < length; ++i) data[i] = integer_value(r.id(), i);
    ring(r.world(), std::span<float>(data), r.memory());
    result[static_cast<std::size_t>(r.id())] = data;
  });
  return result;
}

// For rings of 1 to 8 ranks and each of their awkward lengths (both captured for a failure's
// message): runs `ring` on integer values, then `check(n, length, cluster, result)`.
template <class Check>
void for_each_ring_run(RingOp ring, Check check) {
  for (int n = 1; n <= 8; ++n) {
    for (std::size_t length : awkward_lengths(n)) {
      CAPTURE(n);
      CAPTURE(length);
      Cluster cluster(n);
      check(n, length, cluster, run_on_integers(cluster, n, length, ring));
    }
  }
}

}  // namespace

// The first half on its own: it can pass before the all-gather is written.
TEST_CASE("ring reduce-scatter: rank r owns the summed chunk r + 1, after N-1 messages") {
  for_each_ring_run(ring_reduce_scatter, [](int n, std::size_t length, Cluster& cluster,
                                            const std::vector<std::vector<float>>& result) {
    const double buffer_bytes = static_cast<double>(length * sizeof(float));
    const std::vector<float> sums = naive_sums(n, length);
    mgpu_test::RankChecks owned_sums(n);
    double total_sent = 0.0;
    for (int rank = 0; rank < n; ++rank) {
      const auto& got = result[static_cast<std::size_t>(rank)];
      REQUIRE_MESSAGE(got.size() == length, "rank " << rank << "'s buffer has " << got.size()
                                                    << " elements after the call, not " << length);
      // Only the owned chunk is specified: the others hold partial sums.
      const int owned = (rank + 1) % n;
      const Chunk c = ring_chunk(length, n, owned);
      const auto part = [&](const std::vector<float>& v) {
        return std::span<const float>(v).subspan(c.offset, c.count);
      };
      owned_sums.compare(rank, "data", part(got), part(sums), {},
                         {.offset = c.offset, .where = mgpu_test::ring_chunks(length, n)});
    }
    INFO("each rank's owned chunk (r + 1) against the naive sum, " << run_name(n, length));
    owned_sums.require();  // the first failing run only: the others would tell the same story
    for (int rank = 0; rank < n; ++rank) {
      const TrafficCounts sent = cluster.report(rank).traffic.op(OpKind::send);
      total_sent += static_cast<double>(sent.bytes_sent);
      REQUIRE_MESSAGE(
          sent.messages_sent == static_cast<std::uint64_t>(n - 1),
          "rank " << rank << " sent " << sent.messages_sent << " messages, not N-1 = " << n - 1);
      REQUIRE_MESSAGE(cluster.report(rank).traffic.total().bytes_sent == sent.bytes_sent,
                      "rank " << rank << " sent bytes outside send/isend (a collective?)");
    }
    // Summed over ranks, every chunk goes out N-1 times: N-1 buffers in all.
    REQUIRE(total_sent == doctest::Approx((n - 1) * buffer_bytes).epsilon(1e-12));
  });
}

TEST_CASE("ring all-reduce equals the naive sum for 1..8 ranks and awkward lengths") {
  for_each_ring_run(ring_all_reduce, [](int n, std::size_t length, Cluster&,
                                        const std::vector<std::vector<float>>& result) {
    const std::vector<float> sums = naive_sums(n, length);
    mgpu_test::RankChecks all(n);
    for (int rank = 0; rank < n; ++rank) {
      // Integer values: every order of summation gives the naive sum exactly.
      all.compare(rank, "data", result[static_cast<std::size_t>(rank)], sums, {},
                  {.where = mgpu_test::ring_chunks(length, n)});
    }
    INFO("every rank's data against the naive sum, " << run_name(n, length));
    all.require();  // the first failing run only: the others would tell the same story
  });
}

TEST_CASE("ring all-reduce of random floats: close to the double sum and identical on every rank") {
  for (int n : {2, 3, 5, 8}) {
    const std::size_t length = 1000 + static_cast<std::size_t>(n);  // not a multiple of n
    std::vector<std::vector<float>> input(static_cast<std::size_t>(n)),
        result(static_cast<std::size_t>(n));
    for (int q = 0; q < n; ++q) {
      input[static_cast<std::size_t>(q)].resize(length);
      model::Rng(100 + static_cast<std::uint64_t>(q))
          .fill_normal(input[static_cast<std::size_t>(q)], 1.0);
    }
    Cluster cluster(n);
    cluster.run([&](Rank& r) {
      std::vector<float> data = input[static_cast<std::size_t>(r.id())];
      ring_all_reduce(r.world(), std::span<float>(data), r.memory());
      result[static_cast<std::size_t>(r.id())] = data;
    });
    std::vector<double> exact(length, 0.0);
    for (std::size_t i = 0; i < length; ++i)
      for (int q = 0; q < n; ++q) exact[i] += input[static_cast<std::size_t>(q)][i];
    std::printf("ring all-reduce fp32, %d ranks, %zu floats: max error vs double sum %.2e\n", n,
                length, mgpu_test::max_abs_diff(result[0], exact));
    const auto chunks = mgpu_test::ring_chunks(length, n);
    INFO("rank 0's data against the sum in double, " << run_name(n, length));
    mgpu_test::require_close("data", result[0], exact, mgpu_test::below(1e-5 * n),
                             {.rank = 0, .ranks = n, .where = chunks});
    // Every rank ends with the same bits: the finished chunks are copied round the ring.
    mgpu_test::RankChecks same(n);
    for (int q = 1; q < n; ++q)
      same.compare_bits(q, "data", result[static_cast<std::size_t>(q)], result[0],
                        {.where = chunks});
    INFO("every rank's data against rank 0's, bit for bit, " << run_name(n, length));
    same.require();
  }
}

TEST_CASE("ring all-reduce in bf16 adds in float: within bf16 rounding of the exact sum") {
  for (int n : {2, 3, 5, 8}) {
    const std::size_t length = 101;
    std::vector<std::vector<bf16>> input(static_cast<std::size_t>(n)),
        result(static_cast<std::size_t>(n));
    for (int q = 0; q < n; ++q) {
      std::vector<float> values(length);
      model::Rng(200 + static_cast<std::uint64_t>(q)).fill_normal(values, 1.0);
      for (float v : values) input[static_cast<std::size_t>(q)].push_back(bf16(v));
    }
    Cluster cluster(n);
    cluster.run([&](Rank& r) {
      std::vector<bf16> data = input[static_cast<std::size_t>(r.id())];
      ring_all_reduce(r.world(), std::span<bf16>(data), r.memory());
      result[static_cast<std::size_t>(r.id())] = data;
    });
    double worst = 0.0;  // error in units of the rounding bound
    std::vector<double> exact(length, 0.0), bound(length), got(length);
    for (std::size_t i = 0; i < length; ++i) {
      double magnitude = 0.0;
      for (int q = 0; q < n; ++q) {
        exact[i] += static_cast<float>(input[static_cast<std::size_t>(q)][i]);
        magnitude += std::abs(static_cast<float>(input[static_cast<std::size_t>(q)][i]));
      }
      // One bf16 rounding (relative 2^-8) per addition on the way, each of at most the magnitude.
      bound[i] = (n - 1) * magnitude * std::ldexp(1.0, -8) + 1e-30;
      got[i] = static_cast<float>(result[0][i]);
      worst = std::max(worst, std::abs(got[i] - exact[i]) / bound[i]);
    }
    std::printf("ring all-reduce bf16, %d ranks: worst error %.2f of the rounding bound\n", n,
                worst);
    const auto chunks = mgpu_test::ring_chunks(length, n);
    INFO("rank 0's bf16 data against the exact sum, within one bf16 rounding per addition, "
         << run_name(n, length));
    const mgpu_test::Mismatch m = mgpu_test::compare_within(
        "data", got, exact, bound, {.rank = 0, .ranks = n, .where = chunks});
    REQUIRE_MESSAGE(m.count == 0, m.report);
    // Every rank ends with the same bits.
    mgpu_test::RankChecks same(n);
    for (int q = 1; q < n; ++q)
      same.compare_bits(q, "data", result[static_cast<std::size_t>(q)], result[0],
                        {.where = chunks});
    INFO("every rank's bf16 data against rank 0's, bit for bit, " << run_name(n, length));
    same.require();
  }
}

TEST_CASE("ring all-reduce sends 2(N-1)/N of the buffer per rank in 2(N-1) messages") {
  for (int n = 1; n <= 8; ++n) {
    for (std::size_t length : awkward_lengths(n)) {
      CAPTURE(n);
      CAPTURE(length);
      Cluster cluster(n);
      cluster.run([&](Rank& r) {
        std::vector<float> data(length, 1.0f);
        ring_all_reduce(r.world(), std::span<float>(data), r.memory());
      });
      const double buffer_bytes = static_cast<double>(length * sizeof(float));
      const auto small_chunk =
          static_cast<double>(length / static_cast<std::size_t>(n) * sizeof(float));
      const auto big_chunk = static_cast<double>((length + static_cast<std::size_t>(n) - 1) /
                                                 static_cast<std::size_t>(n) * sizeof(float));
      // REQUIRE: the first wrong count ends the test, rather than one line per rank and run.
      double total_sent = 0.0;
      for (int rank = 0; rank < n; ++rank) {
        CAPTURE(rank);
        const RankReport& rep = cluster.report(rank);
        const TrafficCounts sent = rep.traffic.op(OpKind::send);
        total_sent += static_cast<double>(sent.bytes_sent);
        REQUIRE(sent.messages_sent == static_cast<std::uint64_t>(2 * (n - 1)));
        // Every message is one chunk, so a rank sends between 2(N-1) small and 2(N-1) big chunks.
        REQUIRE(static_cast<double>(sent.bytes_sent) >= 2.0 * (n - 1) * small_chunk);
        REQUIRE(static_cast<double>(sent.bytes_sent) <= 2.0 * (n - 1) * big_chunk);
        REQUIRE(rep.traffic.op(OpKind::all_reduce).bytes_sent == 0);  // built on send/recv only
      }
      // Summed over ranks, every chunk but one per rank goes out twice: exactly 2(N-1) buffers.
      REQUIRE(total_sent == doctest::Approx(2.0 * (n - 1) * buffer_bytes).epsilon(1e-12));
      if (n > 1 && length > 0) {
        // The staging buffer is one (big) chunk, and it is in the ledger.
        REQUIRE(static_cast<double>(cluster.report(0).memory.peak(Category::comm)) >= big_chunk);
      }
    }
  }
}

TEST_CASE("measured ring traffic per rank equals the 11.2 formulas") {
  const std::size_t length = 1 << 12;
  for (int n : {2, 4, 8}) {
    Cluster cluster(n);
    cluster.run([&](Rank& r) {
      std::vector<float> data(length, 1.0f);
      ring_all_reduce(r.world(), std::span<float>(data), r.memory());
    });
    const double predicted =
        ring_all_reduce_bytes_per_rank(n, static_cast<double>(length * sizeof(float)));
    const TrafficCounts sent = cluster.report(0).traffic.op(OpKind::send);
    std::printf(
        "ring %d ranks, %zu bytes: measured %llu bytes / %llu messages per rank, formula %.0f / "
        "%lld\n",
        n, length * sizeof(float), static_cast<unsigned long long>(sent.bytes_sent),
        static_cast<unsigned long long>(sent.messages_sent), predicted,
        static_cast<long long>(ring_all_reduce_messages_per_rank(n)));
    CHECK(static_cast<double>(sent.bytes_sent) == doctest::Approx(predicted).epsilon(1e-12));
    CHECK(static_cast<std::int64_t>(sent.messages_sent) == ring_all_reduce_messages_per_rank(n));
  }
}
