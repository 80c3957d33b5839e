// Point-to-point messages: data arrives intact, in order, and buffered sends avoid deadlock.
#include "mgpu/mgpu.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace mgpu;

TEST_CASE("a message arrives intact and unchanged by later writes to the send buffer") {
  Cluster cluster(2);
  cluster.run([](Rank& r) {
    Comm& w = r.world();
    if (w.rank() == 0) {
      std::vector<float> v = {1.5f, -2.0f, 3.25f};
      Request req = w.isend(v, 1, 7);
      v.assign(3, 0.0f);  // the data was copied at post
      req.wait();
    } else {
      std::vector<float> got(3);
      w.recv(got, 0, 7);
      CHECK(got == std::vector<float>{1.5f, -2.0f, 3.25f});
    }
  });
}

TEST_CASE("messages with the same peer and tag arrive in the order sent, tags select") {
  Cluster cluster(2);
  cluster.run([](Rank& r) {
    Comm& w = r.world();
    if (w.rank() == 0) {
      for (int i = 0; i < 5; ++i) w.send(std::vector<double>{double(i)}, 1, 1);
      w.send(std::vector<double>{100.0}, 1, 2);
    } else {
      std::vector<double> x(1);
      w.recv(x, 0, 2);  // tag 2 first, although it was sent last
      CHECK(x[0] == 100.0);
      for (int i = 0; i < 5; ++i) {
        w.recv(x, 0, 1);
        CHECK(x[0] == double(i));
      }
    }
  });
}

TEST_CASE("everyone sends then receives around a ring without deadlock, for any world size") {
  for (int n : {1, 2, 3, 7}) {
    Cluster cluster(n);
    cluster.run([n](Rank& r) {
      Comm& w = r.world();
      const int me = w.rank();
      std::vector<bf16> out(4, bf16(float(me))), in(4);
      w.send(out, (me + 1) % n, 0);
      w.recv(in, (me + n - 1) % n, 0);
      CHECK(float(in[3]) == float((me + n - 1) % n));
    });
  }
}

TEST_CASE("irecv posted before the send, and test() polls to completion") {
  Cluster cluster(2);
  cluster.run([](Rank& r) {
    Comm& w = r.world();
    if (w.rank() == 1) {
      std::vector<float> x(2);
      Request q = w.irecv(x, 0, 3);
      w.barrier();  // rank 0 sends after the barrier
      q.wait();
      CHECK(x[1] == 9.0f);
      CHECK(q.done());
    } else {
      w.barrier();
      Request s = w.isend(std::vector<float>{8.0f, 9.0f}, 1, 3);
      while (!s.test()) {
      }
    }
  });
}

TEST_CASE("a receive's Request may outlive every Comm of its group") {
  Cluster cluster(2);
  cluster.run([](Rank& r) {
    std::vector<float> x(1);
    Request q;
    {
      Comm pair = r.world().split(0, r.id(), "pair");
      if (pair.rank() == 0) {
        pair.send(std::vector<float>{5.0f}, 1, 0);
      } else {
        q = pair.irecv(x, 0, 0);
      }
    }  // both ranks have dropped their only Comm of "pair" here
    q.wait();
    if (r.id() == 1) CHECK(x[0] == 5.0f);
    r.world().barrier();
  });
  CHECK(cluster.report(1).traffic.group("pair").bytes_received ==
        sizeof(float));  // named after the dead group
}

TEST_CASE("Buffers pass straight to send and recv") {
  Cluster cluster(2);
  cluster.run([](Rank& r) {
    Buffer<float> b(r.memory(), Category::comm, 16, "staging");
    if (r.id() == 0) {
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(i);
      r.world().send(b, 1);
    } else {
      r.world().recv(b, 0);
      CHECK(b[15] == 15.0f);
    }
  });
}
