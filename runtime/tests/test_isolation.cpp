// Ranks in processes (RankIsolation::processes): the same rank code gives the same values,
// meters, ledgers and clocks as thread-per-rank; errors keep their types; a rank's memory is
// its own; a rank process that crashes or hangs fails the run instead of hanging it.
#include "helpers.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace mgpu;
using namespace mgpu::test;

// These tests fork ranks out of a multi-threaded program, which the sanitizers do not follow
// cleanly (ThreadSanitizer least of all): the sanitizer builds skip them, and say so.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
TEST_SUITE_BEGIN("ranks in processes" * doctest::skip(kSanitized));

namespace {

Cluster make(int n, RankIsolation isolation) {
  ClusterConfig c;
  c.world_size = n;
  c.gpus_per_node = 2;  // groups that span nodes take the inter-node link
  c.isolation = isolation;
  c.rank_arena_bytes = std::size_t(8) << 20;
  return Cluster(c);
}

/// Runs `body` both ways and checks that everything the cluster reports agrees exactly.
void same_both_ways(int n, const std::function<void(Rank&)>& body,
                    const std::vector<std::string>& names) {
  Cluster threads = make(n, RankIsolation::threads);
  Cluster procs = make(n, RankIsolation::processes);
  threads.run(body);
  procs.run(body);
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    const RankReport& a = threads.report(r);
    const RankReport& b = procs.report(r);
    CHECK(a.traffic.total() == b.traffic.total());
    for (OpKind k : {OpKind::send, OpKind::recv, OpKind::all_reduce, OpKind::reduce_scatter,
                     OpKind::all_gather, OpKind::broadcast, OpKind::all_to_all,
                     OpKind::all_to_all_v, OpKind::barrier})
      CHECK(a.traffic.op(k) == b.traffic.op(k));
    CHECK(a.memory.peak_total() == b.memory.peak_total());
    CHECK(a.memory.current_total() == b.memory.current_total());
    for (std::size_t c = 0; c < kCategoryCount; ++c)
      CHECK(a.memory.peak(static_cast<Category>(c)) == b.memory.peak(static_cast<Category>(c)));
    CHECK(a.clock.now() == b.clock.now());
    CHECK(a.clock.idle_time() == b.clock.idle_time());
    CHECK(a.clock.timeline().size() == b.clock.timeline().size());
    CHECK(a.checkpoints.size() == b.checkpoints.size());
    for (const auto& [name, at] : a.checkpoints) {
      CAPTURE(name);
      REQUIRE(b.checkpoints.count(name) == 1);
      CHECK(at.now == b.checkpoints.at(name).now);
      CHECK(at.traffic.total() == b.checkpoints.at(name).traffic.total());
      CHECK(at.memory.peak_total() == b.checkpoints.at(name).memory.peak_total());
    }
    for (const auto& name : names) {
      CAPTURE(name);
      CHECK(threads.published<float>(r, name) == procs.published<float>(r, name));
    }
  }
}

}  // namespace

TEST_CASE("a ring of sends and receives gives the same values, meters and clocks in processes") {
  for (int n : {1, 2, 3, 5}) {
    CAPTURE(n);
    same_both_ways(n,
                   [n](Rank& r) {
                     Comm& w = r.world();
                     const int me = w.rank();
                     Buffer<float> mine(r.memory(), Category::comm, 37, "mine");
                     for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = value<float>(me, i);
                     std::vector<float> got(37);
                     r.compute(1e9 * (me + 1), "work");
                     Request s = w.isend(mine, (me + 1) % n, 3);
                     w.recv(got, (me + n - 1) % n, 3);
                     s.wait();
                     r.publish("got", got);
                     std::vector<float> now{static_cast<float>(r.now())};
                     r.publish("now", now);
                   },
                   {"got", "now"});
  }
  // The received values are the left neighbour's, as the ring says.
  Cluster procs = make(4, RankIsolation::processes);
  procs.run([](Rank& r) {
    std::vector<float> out(5), in(5);
    for (std::size_t i = 0; i < 5; ++i) out[i] = value<float>(r.id(), i);
    r.world().send(out, (r.id() + 1) % 4);
    r.world().recv(in, (r.id() + 3) % 4);
    r.publish("in", in);
  });
  for (int r = 0; r < 4; ++r)
    for (std::size_t i = 0; i < 5; ++i)
      CHECK(procs.published<float>(r, "in")[i] == value<float>((r + 3) % 4, i));
}

TEST_CASE("every collective, split and non-blocking overlap agree with thread-per-rank") {
  same_both_ways(
      4,
      [](Rank& r) {
        Comm& w = r.world();
        const int me = w.rank();
        const int n = w.size();
        std::vector<float> v(10);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = value<float>(me, i);
        Request q = w.iall_reduce(v, ReduceOp::avg);
        r.compute(3e9, "overlapped");
        q.wait();
        r.publish("all_reduce", v);
        r.checkpoint("after all_reduce");

        std::vector<float> in(12), out(3);
        for (std::size_t i = 0; i < in.size(); ++i) in[i] = value<float>(me, i + 5);
        w.reduce_scatter(in, out);
        r.publish("reduce_scatter", out);

        std::vector<float> gathered(12);
        for (std::size_t i = 0; i < 3; ++i) gathered[3 * me + i] = value<float>(me, i);
        w.all_gather(std::span<const float>(gathered).subspan(3 * me, 3), gathered);  // in place
        r.publish("all_gather", gathered);

        std::vector<float> b(6, float(me));
        w.broadcast(b, 2);
        r.publish("broadcast", b);

        std::vector<float> a2a_in(8), a2a_out(8);
        for (std::size_t i = 0; i < 8; ++i) a2a_in[i] = value<float>(me, i);
        w.all_to_all(a2a_in, a2a_out);
        r.publish("all_to_all", a2a_out);

        std::vector<std::size_t> sc(n), rc(n);
        for (int j = 0; j < n; ++j) {
          sc[j] = static_cast<std::size_t>(me + j + 1);
          rc[j] = static_cast<std::size_t>(j + me + 1);
        }
        std::vector<float> vin(std::accumulate(sc.begin(), sc.end(), std::size_t(0)), float(me));
        std::vector<float> vout(std::accumulate(rc.begin(), rc.end(), std::size_t(0)));
        w.all_to_all_v(vin, sc, vout, rc);
        r.publish("all_to_all_v", vout);

        // Checks inside a rank's process would be lost with it: what split gave is published.
        Comm half = w.split(me % 2, me, "half");
        std::vector<float> h{float(me)};
        half.all_reduce(h);
        r.publish("split", h);
        const Comm none = w.split(-1, 0, "none");
        r.publish("split_group",
                  std::vector<float>{float(half.size()), float(half.rank()),
                                     float(half.global_rank(half.rank())),
                                     float(half.name() == "half"), float(none.valid())});
        w.barrier();
        Buffer<float> grads(r.memory(), Category::grads, 100, "g");
        r.checkpoint("end");
        r.memory().reset_peaks();
      },
      {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all", "all_to_all_v",
       "split", "split_group"});
}

TEST_CASE("errors cross from a rank's process with their type and message") {
  auto procs = make(2, RankIsolation::processes);
  CHECK_THROWS_AS(procs.run([](Rank& r) {
    if (r.id() == 1) throw NotImplemented("11.2 ring_all_reduce");
    r.world().barrier();
  }),
                  NotImplemented);
  CHECK_THROWS_WITH_AS(procs.run([](Rank& r) {
    std::vector<float> x(1);
    r.world().recv(x, 1 - r.id());  // both receive first
  }),
                       doctest::Contains("deadlock"), DeadlockError);
  CHECK_THROWS_AS(procs.run([](Rank& r) {
    std::vector<float> x(r.id() + 1);
    r.world().all_reduce(x);
  }),
                  CollectiveMismatch);
  CHECK_THROWS_WITH_AS(procs.run([](Rank& r) { r.world().send(std::vector<float>(1), 5); }),
                       doctest::Contains("peer 5"), std::invalid_argument);
  ClusterConfig small;
  small.world_size = 2;
  small.isolation = RankIsolation::processes;
  small.memory_capacity_bytes = 100;
  Cluster tight(small);
  CHECK_THROWS_AS(
      tight.run([](Rank& r) { Buffer<float> b(r.memory(), Category::weights, 30, "w"); }),
      OutOfMemory);
}

TEST_CASE("a rank process that crashes or hangs fails the run and nothing is left running") {
  auto procs = make(3, RankIsolation::processes);
  CHECK_THROWS_WITH(procs.run([](Rank& r) {
    if (r.id() == 1) std::raise(SIGSEGV);
    std::vector<float> x(4);
    r.world().all_reduce(x);
  }),
                    doctest::Contains("signal"));
  // Rank 0 fails while rank 2 computes forever: the run ends with rank 0's error.
  CHECK_THROWS_WITH(procs.run([](Rank& r) {
    if (r.id() == 0) throw std::runtime_error("rank zero gave up");
    if (r.id() == 2)
      for (std::atomic<unsigned long> spin{0};; spin.fetch_add(1, std::memory_order_relaxed)) {
      }
    r.world().barrier();
  }),
                    doctest::Contains("rank zero gave up"));
}

namespace {
float g_shared = 0;  // one per process when ranks are processes
}

TEST_CASE("a rank cannot see what another rank writes to its own memory") {
  for (RankIsolation iso : {RankIsolation::threads, RankIsolation::processes}) {
    g_shared = 0;
    auto cluster = make(2, iso);
    cluster.run([](Rank& r) {
      if (r.id() == 1) g_shared = 42;
      r.world().barrier();
      std::vector<float> seen{g_shared};
      r.publish("seen", seen);
    });
    const float rank0_saw = cluster.published<float>(0, "seen")[0];
    if (iso == RankIsolation::threads) {
      CHECK(rank0_saw == 42);  // one address space: the write is visible (the hole)
    } else {
      CHECK(rank0_saw == 0);  // separate processes: rank 1's write stayed in rank 1
      CHECK(g_shared == 0);   // and never reached the process that runs the cluster
    }
  }
}

TEST_CASE("a rank process cannot write to a descriptor its parent marked close-on-exec") {
  // A grader's result pipe is such a descriptor: a rank that could write to it could void the
  // case that runs it. Descriptors without the mark are inherited as usual.
  for (RankIsolation iso : {RankIsolation::threads, RankIsolation::processes}) {
    CAPTURE(static_cast<int>(iso));
    int marked[2], plain[2];
    REQUIRE(::pipe2(marked, O_CLOEXEC | O_NONBLOCK) == 0);
    REQUIRE(::pipe2(plain, O_NONBLOCK) == 0);
    auto cluster = make(2, iso);
    cluster.run([&](Rank& r) {
      const char c = 'x';
      r.publish("wrote", std::vector<float>{::write(marked[1], &c, 1) == 1 ? 1.0f : 0.0f,
                                            ::write(plain[1], &c, 1) == 1 ? 1.0f : 0.0f});
    });
    char got[8];
    const ssize_t through_marked = ::read(marked[0], got, sizeof got);
    const ssize_t through_plain = ::read(plain[0], got, sizeof got);
    for (int r = 0; r < 2; ++r) {
      const auto wrote = cluster.published<float>(r, "wrote");
      CHECK(wrote[0] == (iso == RankIsolation::threads ? 1.0f : 0.0f));
      CHECK(wrote[1] == 1.0f);
    }
    CHECK(through_marked == (iso == RankIsolation::threads ? 2 : -1));  // -1: empty (EAGAIN)
    CHECK(through_plain == 2);
    for (int fd : {marked[0], marked[1], plain[0], plain[1]}) ::close(fd);
  }
}

TEST_CASE("published values are checked by name and type") {
  auto procs = make(2, RankIsolation::processes);
  procs.run([](Rank& r) { r.publish("x", std::vector<double>{1.0, 2.0}); });
  CHECK(procs.published<double>(1, "x") == std::vector<double>{1.0, 2.0});
  CHECK_THROWS_AS(procs.published<float>(1, "x"), std::invalid_argument);
  CHECK_THROWS_AS(procs.published<double>(1, "y"), std::out_of_range);
  CHECK_THROWS_AS(procs.run([](Rank& r) { r.clock(); }), std::logic_error);
}

namespace {
// The rendezvous of a rank that wants its peers' buffers without communicating.
std::mutex g_mu;
std::condition_variable g_cv;
std::vector<const float*> g_peers(2);
int g_arrived = 0;
}  // namespace

TEST_CASE("a rank that sums a peer's buffer through a pointer gets it only with threads") {
  for (RankIsolation iso : {RankIsolation::threads, RankIsolation::processes}) {
    CAPTURE(static_cast<int>(iso));
    g_arrived = 0;
    auto cluster = make(2, iso);
    cluster.run([](Rank& r) {
      std::vector<float> mine(8, float(r.id() + 1));
      std::vector<float> sum = mine;
      std::unique_lock lk(g_mu);
      g_peers[static_cast<std::size_t>(r.id())] = mine.data();
      ++g_arrived;
      g_cv.notify_all();
      // Both ranks of one address space meet here; a rank alone in its process gives up.
      if (g_cv.wait_for(lk, std::chrono::milliseconds(500), [] { return g_arrived >= 2; }))
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = g_peers[0][i] + g_peers[1][i];
      lk.unlock();
      r.world().send(sum, 1 - r.id());  // dummy bytes for the meter
      r.world().recv(sum, 1 - r.id());
      r.world().barrier();  // nobody frees `mine` while the other may still read it
      r.publish("sum", std::vector<float>{sum[0]});
    });
    // The values exchanged are each rank's "sum"; rank 0 ends with rank 1's.
    const float got = cluster.published<float>(0, "sum")[0];
    if (iso == RankIsolation::threads)
      CHECK(got == 3.0f);  // 1 + 2, never communicated
    else
      CHECK(got == 2.0f);  // rank 1 only had its own buffer to send
  }
}

TEST_CASE("32 ranks in processes fit the address-space limit a graded case runs under") {
  // A graded case runs with RLIMIT_AS at its memory limit (2 GiB by default), and the calling
  // process maps every rank's arena: at the default 64 MiB, 32 of them alone would fill it.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const rlimit as{rlim_t(2) << 30, rlim_t(2) << 30};
    int code = 1;
    try {
      ClusterConfig c;
      c.world_size = 32;
      c.isolation = RankIsolation::processes;
      Cluster cluster(c);
      if (::setrlimit(RLIMIT_AS, &as) != 0) std::_Exit(2);
      cluster.run([](Rank& r) {
        std::vector<float> x(16, static_cast<float>(r.id()));
        r.world().all_reduce(x);
        if (x[0] != 31.0f * 32.0f / 2.0f) throw std::runtime_error("wrong sum");
      });
      code = 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
    }
    std::_Exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_SUITE_END();
