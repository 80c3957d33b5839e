// Faults end the run promptly with a clear error: deadlocks, mismatched collectives, an
// exception in one rank, and invalid arguments. Nothing hangs.
#include "mgpu/mgpu.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <string>

using namespace mgpu;

namespace {
/// Runs `body` on n ranks, expects exception E, returns its message; checks it took < 1 s.
template <class E>
std::string failure(int n, const std::function<void(Rank&)>& body) {
  Cluster cluster(n);
  auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  try {
    cluster.run(body);
    FAIL("the run should have failed");
  } catch (const E& e) {
    msg = e.what();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(secs < 1.0);
  return msg;
}
bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("two ranks that both receive first deadlock, and the report names each wait") {
  const std::string msg = failure<DeadlockError>(2, [](Rank& r) {
    std::vector<float> x(4);
    r.world().recv(x, 1 - r.id(), 5);
    r.world().send(x, 1 - r.id(), 5);
  });
  MESSAGE(msg);
  CHECK(has(msg, "rank 0: waits for recv from rank 1"));
  CHECK(has(msg, "rank 1: waits for recv from rank 0"));
  CHECK(has(msg, "tag 5"));
  CHECK(has(msg, "world{0,1}"));
}

TEST_CASE("a collective that one rank never calls is a deadlock once the others block") {
  const std::string msg = failure<DeadlockError>(3, [](Rank& r) {
    if (r.id() != 2) r.world().barrier();
  });
  MESSAGE(msg);
  CHECK(has(msg, "rank 2: finished"));
  CHECK(has(msg, "barrier in group world{0,1,2}"));
  CHECK(has(msg, "2 (global 2)"));
}

TEST_CASE("a deadlock among some ranks while another waits on them is still found") {
  const std::string msg = failure<DeadlockError>(4, [](Rank& r) {
    std::vector<double> x(1);
    if (r.id() < 2) r.world().recv(x, 1 - r.id(), 0);
    r.world().all_reduce(x);
  });
  CHECK(has(msg, "rank 3: waits for all_reduce"));
}

TEST_CASE("mismatched collective counts fail every rank with a message naming both ranks") {
  const std::string msg = failure<CollectiveMismatch>(4, [](Rank& r) {
    Comm tp = r.world().split(0, r.id(), "tp");
    std::vector<float> v(r.id() == 3 ? 100 : 128);
    tp.all_reduce(v);
  });
  MESSAGE(msg);
  CHECK(has(msg, "all_reduce in group tp{0,1,2,3}: rank 3 count 100 differs from rank 0's 128"));
}

TEST_CASE("a deadlock report mentions when the members that arrived already disagree") {
  const std::string msg = failure<DeadlockError>(3, [](Rank& r) {
    std::vector<float> v(r.id() == 1 ? 100 : 128);
    if (r.id() != 2) r.world().all_reduce(v);
  });
  CHECK(has(
      msg,
      "disagree: all_reduce in group world{0,1,2}: rank 1 count 100 differs from rank 0's 128"));
}

TEST_CASE("mismatched op, root, dtype and reduce op are reported") {
  CHECK(has(failure<CollectiveMismatch>(2,
                                        [](Rank& r) {
                                          std::vector<float> v(4), w(8);
                                          if (r.id() == 0)
                                            r.world().all_reduce(v);
                                          else
                                            r.world().all_gather(v, w);
                                        }),
            "calls"));
  CHECK(has(failure<CollectiveMismatch>(2,
                                        [](Rank& r) {
                                          std::vector<float> v(4);
                                          r.world().broadcast(v, r.id());
                                        }),
            "root"));
  CHECK(has(failure<CollectiveMismatch>(2,
                                        [](Rank& r) {
                                          std::vector<float> f(4);
                                          std::vector<double> d(4);
                                          if (r.id() == 0)
                                            r.world().all_reduce(f);
                                          else
                                            r.world().all_reduce(d);
                                        }),
            "dtype"));
  CHECK(has(failure<CollectiveMismatch>(2,
                                        [](Rank& r) {
                                          std::vector<float> v(4);
                                          r.world().all_reduce(
                                              v, r.id() == 0 ? ReduceOp::sum : ReduceOp::max);
                                        }),
            "reduce op"));
  CHECK(has(
      failure<CollectiveMismatch>(2,
                                  [](Rank& r) {
                                    std::vector<std::size_t> sc{1, 1}, rc{1, r.id() == 0 ? 2u : 1u};
                                    std::vector<float> in(2), out(r.id() == 0 ? 3 : 2);
                                    r.world().all_to_all_v(in, sc, out, rc);
                                  }),
      "expects 2"));
}

TEST_CASE("an exception in one rank stops the others and reaches the caller with its type") {
  const std::string msg = failure<NotImplemented>(4, [](Rank& r) {
    std::vector<float> v(10);
    if (r.id() == 2) throw NotImplemented("11.2 ring_all_reduce");
    if (r.id() == 0) r.world().recv(v, 1, 0);  // never satisfied: rank 1 goes to the all_reduce
    r.world().all_reduce(v);
  });
  CHECK(msg == "not implemented: 11.2 ring_all_reduce");
}

TEST_CASE("an exception while a non-blocking collective is pending does not hang") {
  const std::string msg = failure<std::runtime_error>(3, [](Rank& r) {
    std::vector<float> v(1 << 16);
    Request q = r.world().iall_reduce(v);
    if (r.id() == 1) throw std::runtime_error("boom in rank 1");
    q.wait();
    r.world().barrier();
  });
  CHECK(msg == "boom in rank 1");
}

TEST_CASE("invalid arguments throw std::invalid_argument with the fix in the message") {
  std::string msg = failure<std::invalid_argument>(2, [](Rank& r) {
    std::vector<float> v(1);
    r.world().send(v, 2, 0);
  });
  CHECK(has(msg, "peer 2 is not a rank of group world{0,1}"));
  msg = failure<std::invalid_argument>(2, [](Rank& r) {
    std::vector<float> v(1);
    r.world().send(v, 1 - r.id(), -1);
  });
  CHECK(has(msg, "tag -1"));
  msg = failure<std::invalid_argument>(2, [](Rank& r) {
    std::vector<float> in(10), out(4);
    r.world().reduce_scatter(in, out);
  });
  CHECK(has(msg, "must have group size 2 x output size 4 = 8"));
  msg = failure<std::invalid_argument>(2, [](Rank& r) {
    std::vector<float> v(r.id() == 0 ? 3 : 4);
    if (r.id() == 0)
      r.world().send(v, 1);
    else
      r.world().recv(v, 0);
  });
  CHECK(has(msg, "the message holds 3 f32 elements but the receive buffer holds 4"));
  msg = failure<std::invalid_argument>(3, [](Rank& r) {
    std::vector<float> v(4);
    r.world().all_to_all(v, v);
  });
  CHECK(has(msg, "not divisible by group size 3"));
}

TEST_CASE("a receive abandoned by an exception does not take a later message") {
  Cluster cluster(2);
  cluster.run([](Rank& r) {
    Comm& w = r.world();
    if (w.rank() == 1) {
      std::vector<float> early(1, -1.0f);
      try {
        Request q = w.irecv(early, 0, 3);
        w.send(early, 7, 0);  // no rank 7: throws while q is pending, and q is dropped
        FAIL("the send to rank 7 should have thrown");
      } catch (const std::invalid_argument&) {
      }
      w.barrier();  // rank 0 sends only now, after the first receive was given up
      std::vector<float> late(1);
      w.recv(late, 0, 3);
      CHECK(late[0] == 42.0f);
      CHECK(early[0] == -1.0f);  // the abandoned receive's buffer is never written
    } else {
      w.barrier();
      w.send(std::vector<float>{42.0f}, 1, 3);
    }
  });
}

TEST_CASE("a rank that catches an invalid-argument error may carry on") {
  Cluster cluster(2);
  cluster.run([](Rank& r) {
    std::vector<float> v(1);
    CHECK_THROWS_AS(r.world().send(v, 7, 0), std::invalid_argument);
    r.world().all_reduce(v);
  });
}
