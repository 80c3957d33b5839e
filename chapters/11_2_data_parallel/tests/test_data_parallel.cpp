// 11.2 visible tests of data-parallel training: batch slices, identical replicas, equality with
// one-rank training on the whole batch, the bucket plan, and overlap on the virtual clock.
#include <doctest/doctest.h>
#include <mgpu_test/clusters.hpp>
#include <mgpu_test/compare.hpp>
#include <mgpu_test/model_configs.hpp>
#include <mgpu_test/model_where.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "11_2_data_parallel/data_parallel.hpp"
#include "11_2_data_parallel/formulas.hpp"
#include "helpers.hpp"

using namespace mgpu;
using namespace mgpu::data_parallel;
using namespace dp_test;  // the model, seed and optimizer every 11.2 test program shares

namespace {

// Parameters of every rank after `steps` data-parallel steps on `ranks` ranks.
std::vector<std::vector<float>> train(int ranks, int steps, std::int64_t batch_sequences,
                                      GradAverager averager, std::size_t bucket_bytes = 0,
                                      bool overlapped = false) {
  const model::Model net(small_config());
  std::vector<std::vector<float>> params(static_cast<std::size_t>(ranks));
  Cluster cluster(ranks);
  cluster.run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    model::Adam adam(r.memory(), net.num_params(), kAdam);
    const std::vector<Bucket> buckets =
        overlapped ? plan_buckets(net, bucket_bytes) : std::vector<Bucket>{};
    for (int s = 0; s < steps; ++s) {
      const model::Batch batch =
          net.make_batch(batch_sequences, 1000 + static_cast<std::uint64_t>(s));
      if (overlapped) {
        data_parallel_step_overlapped(r, r.world(), net, replica, adam, batch, buckets);
      } else {
        data_parallel_step(r, r.world(), net, replica, adam, batch, averager);
      }
    }
    params[static_cast<std::size_t>(r.id())].assign(replica.params.begin(), replica.params.end());
  });
  return params;
}

// The same training on one rank and the whole batch, with the model and Adam only (no chapter
// code).
std::vector<float> train_single(int steps, std::int64_t batch_sequences) {
  const model::Model net(small_config());
  std::vector<float> params;
  Cluster cluster(1);
  cluster.run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    model::Adam adam(r.memory(), net.num_params(), kAdam);
    for (int s = 0; s < steps; ++s) {
      const model::Batch batch =
          net.make_batch(batch_sequences, 1000 + static_cast<std::uint64_t>(s));
      model::zero(replica.grads.span());
      net.forward_backward(r, replica.params.span(), replica.grads.span(), batch);
      adam.step(replica.params.span(), replica.grads.span());
    }
    params.assign(replica.params.begin(), replica.params.end());
  });
  return params;
}

}  // namespace

TEST_CASE("local_batch gives equal, disjoint slices that tile the batch") {
  const model::Model net(small_config());
  const model::Batch batch = net.make_batch(12, 3);
  std::vector<float> joined;
  std::vector<std::size_t> starts;  // where each rank's slice begins in `joined`
  for (int r = 0; r < 4; ++r) {
    const model::Batch part = local_batch(batch, r, 4);
    CHECK(part.sequences == 3);
    starts.push_back(joined.size());
    joined.insert(joined.end(), part.inputs.begin(), part.inputs.end());
  }
  mgpu_test::check_close("the 4 slices' inputs side by side vs the batch's", joined, batch.inputs,
                         {}, {.where = mgpu_test::chunks(starts, joined.size(), "rank")});
  CHECK_THROWS_AS(local_batch(batch, 0, 5), std::invalid_argument);  // 12 sequences over 5 ranks
  CHECK_THROWS_AS(local_batch(batch, 4, 4), std::invalid_argument);
}

TEST_CASE("data-parallel replicas stay bitwise identical after several steps") {
  for (GradAverager averager : {GradAverager::runtime, GradAverager::ring}) {
    const auto params = train(4, 3, 8, averager);
    const std::string how = averager == GradAverager::runtime ? "runtime all_reduce" : "ring";
    INFO("after 3 steps, averaged by the " << how);
    check_replicas_identical("weights", params);
  }
}

TEST_CASE("data-parallel training equals one-rank training on the whole batch") {
  const int steps = 3;
  const std::int64_t batch = 8;
  const std::vector<float> single = train_single(steps, batch);
  for (int ranks : {2, 4, 8}) {
    for (GradAverager averager : {GradAverager::runtime, GradAverager::ring}) {
      const auto params = train(ranks, steps, batch, averager);
      const char* name = averager == GradAverager::runtime ? "runtime all_reduce" : "ring";
      std::printf(
          "dp %d ranks (%s) vs 1 rank after %d Adam steps: max |diff| %.2e (weights up to %.2f)\n",
          ranks, name, steps, mgpu_test::max_abs_diff(params[0], single),
          mgpu_test::max_abs(single));
      INFO(ranks << " ranks (" << std::string(name) << ") against one rank on the whole batch");
      mgpu_test::check_close("weights", params[0], single, {1e-5, 0},
                             {.rank = 0,
                              .ranks = ranks,
                              .where = mgpu_test::model_tensors(model::Model(small_config()))});
    }
  }
}

TEST_CASE(
    "after a step every rank holds the gradient of the whole batch (the average, not the sum)") {
  // Adam barely notices a gradient scaled by N, so the weights alone would not catch a sum.
  const model::Model net(small_config());
  const model::Batch batch = net.make_batch(8, 21);
  std::vector<float> reference;
  Cluster(1).run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    net.forward_backward(r, replica.params.span(), replica.grads.span(), batch);
    reference.assign(replica.grads.begin(), replica.grads.end());
  });
  for (int variant = 0; variant < 3; ++variant) {
    const int n = 4;
    std::vector<std::vector<float>> grads(n);
    Cluster cluster(n);
    cluster.run([&](Rank& r) {
      model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
      model::Adam adam(r.memory(), net.num_params(), kAdam);
      if (variant == 2) {
        data_parallel_step_overlapped(r, r.world(), net, replica, adam, batch,
                                      plan_buckets(net, 1024));
      } else {
        data_parallel_step(r, r.world(), net, replica, adam, batch,
                           variant == 0 ? GradAverager::runtime : GradAverager::ring);
      }
      grads[static_cast<std::size_t>(r.id())].assign(replica.grads.begin(), replica.grads.end());
    });
    static const char* const names[] = {"runtime all_reduce", "ring", "buckets"};
    const double scale = mgpu_test::max_abs(reference);
    std::printf(
        "dp gradient (%s) vs whole-batch gradient: max |diff| %.2e (gradients up to %.2e)\n",
        names[variant], mgpu_test::max_abs_diff(grads[0], reference), scale);
    INFO("averaged by the " << std::string(names[variant]) << " on " << n
                            << " ranks, against one rank's gradient of the whole batch");
    mgpu_test::check_close("gradient", grads[0], reference, {1e-5 * scale, 0},
                           {.rank = 0, .ranks = n, .where = mgpu_test::model_tensors(net)});
    check_replicas_identical("gradient", grads);
  }
}

TEST_CASE("a data-parallel step sends 2(N-1)/N of the gradient bytes per rank") {
  const model::Model net(small_config());
  const int n = 4;
  Cluster cluster(n);
  cluster.run([&](Rank& r) {
    model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
    model::Adam adam(r.memory(), net.num_params(), kAdam);
    data_parallel_step(r, r.world(), net, replica, adam, net.make_batch(8, 1));
  });
  const double predicted =
      gradient_all_reduce_bytes_per_rank(n, static_cast<double>(net.num_params()), 4.0);
  // Chunks of an uneven buffer differ by one element, so single ranks differ by a few bytes;
  // the mean over ranks is exactly the formula.
  double sent = 0.0;
  for (const RankReport& rep : cluster.reports())
    sent += static_cast<double>(rep.traffic.total().bytes_sent);
  sent /= n;
  std::printf("dp step, %d ranks, %zu parameters: %.1f bytes sent per rank (mean), formula %.1f\n",
              n, net.num_params(), sent, predicted);
  CHECK(sent == doctest::Approx(predicted).epsilon(1e-12));
}

TEST_CASE("gradient buckets cover the gradients once, in backward order, closed at the size cap") {
  const model::Model net(small_config());
  const auto& tensors = net.tensors();
  for (std::size_t cap :
       {std::size_t{0}, std::size_t{512}, std::size_t{4096}, std::size_t{1} << 30}) {
    CAPTURE(cap);
    const std::vector<Bucket> buckets = plan_buckets(net, cap);
    REQUIRE(!buckets.empty());
    std::size_t end = net.num_params();
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      const Bucket& b = buckets[i];
      CHECK(b.offset + b.count == end);  // contiguous, walking down from the top
      end = b.offset;
      // Boundaries fall between tensors, and the ready unit is that of the lowest tensor.
      const auto first = std::find_if(tensors.begin(), tensors.end(),
                                      [&](const auto& t) { return t.offset == b.offset; });
      REQUIRE(first != tensors.end());
      CHECK(b.ready_unit == first->unit);
      const bool last = i + 1 == buckets.size();
      if (!last) CHECK(b.count * sizeof(float) >= cap);
      // Closed as soon as it reached the cap: without its lowest tensor it was still below.
      CHECK((b.count - first->size()) * sizeof(float) < std::max<std::size_t>(cap, 1));
    }
    CHECK(end == 0);
    if (cap == 0) CHECK(buckets.size() == tensors.size());
    if (cap == std::size_t{1} << 30) CHECK(buckets.size() == 1);
  }
}

TEST_CASE("overlapped buckets give bitwise the same weights as the plain step") {
  const auto plain = train(4, 2, 8, GradAverager::runtime);
  const auto bucketed = train(4, 2, 8, GradAverager::runtime, 2048, true);
  mgpu_test::RankChecks same(static_cast<int>(plain.size()));
  for (std::size_t r = 0; r < plain.size(); ++r)
    same.compare_bits(static_cast<int>(r), "weights", bucketed[r], plain[r],
                      {.where = mgpu_test::model_tensors(model::Model(small_config()))});
  INFO("every rank's weights with buckets against the plain step's, bit for bit");
  same.check();
}

TEST_CASE("gradient buckets overlap backward and shorten the step on the virtual clock") {
  const model::Model net(mgpu_test::configs::overlap(6));
  // A slow "GPU" and link for this small model, so compute and communication are comparable
  // and each bucket's time is mostly bandwidth, not per-message latency.
  const ClusterConfig cc = mgpu_test::configs::overlap_cluster(4);
  const model::Batch batch = net.make_batch(64, 5);
  auto step_time = [&](bool overlapped, double* overlap, double* compute, double* comm) {
    Cluster cluster(cc);
    cluster.run([&](Rank& r) {
      model::Replica replica = net.make_replica(r.memory(), kWeightSeed);
      model::Adam adam(r.memory(), net.num_params(), kAdam);
      // About six buckets: few enough that per-message latency stays small, enough to overlap.
      const std::vector<Bucket> buckets = plan_buckets(net, net.num_params() * sizeof(float) / 6);
      if (overlapped) {
        data_parallel_step_overlapped(r, r.world(), net, replica, adam, batch, buckets);
      } else {
        data_parallel_step(r, r.world(), net, replica, adam, batch);
      }
    });
    const RankReport& rep = cluster.report(0);
    *overlap = rep.clock.overlap_time(0.0, rep.clock.end_time());
    *compute = rep.clock.compute_time();
    *comm = rep.clock.comm_time();
    return cluster.makespan();
  };
  double ov_plain = 0, ov_bucket = 0, compute = 0, comm = 0, c2 = 0, m2 = 0;
  const double plain = step_time(false, &ov_plain, &compute, &comm);
  const double bucketed = step_time(true, &ov_bucket, &c2, &m2);
  std::printf(
      "step on 4 ranks: compute %.1f us, all-reduce %.1f us; one all-reduce after backward %.1f "
      "us, "
      "buckets %.1f us (overlap %.1f us, max(compute, comm) = %.1f us)\n",
      compute * 1e6, comm * 1e6, plain * 1e6, bucketed * 1e6, ov_bucket * 1e6,
      std::max(compute, comm) * 1e6);
  CHECK(ov_plain <= 1e-3 * plain);  // no overlap at all: one all-reduce after backward
  CHECK(ov_bucket > 0.0);
  CHECK(bucketed < plain);
  CHECK(bucketed >= std::max(compute, m2) * (1 - 1e-9));
}
