// 11.7 Context parallelism, reference: ring attention with the online softmax, forward and
// backward, on either split of the tokens, and the formulas of its costs.
#include "11_7_3d_and_experts/context_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace mgpu::context {

namespace {

constexpr int kKeysTag = 0;   // keys and values travelling round the ring
constexpr int kGradTag = 1;   // their gradients travelling with them in the backward pass
constexpr double kBytes = 4;  // fp32

// Throws as check_cp_shape does, for the formulas (which have sizes, not matrices).
void check_sizes(const char* where, std::int64_t sequences, std::int64_t seq, std::int64_t width,
                 std::int64_t heads, int ranks, Split split) {
  args::check_count(where, "sequences", sequences);
  args::check_count(where, "width", width);
  check_cp_shape(where, {seq, heads, split}, ranks,
                 MatrixRM::Zero(seq / std::max(ranks, 1), heads));
}

// Causal: a query sees the keys at its own global position and before.
bool sees(std::int64_t query_position, std::int64_t key_position) {
  return key_position <= query_position;
}

// One block of keys and values (from the rank that owns positions kpos) met by this rank's
// queries: the online softmax folds its scores into the running max m, sum l and unnormalised
// output acc, so blocks can arrive in any order. Returns the (query, key) pairs computed.
std::int64_t forward_block(MatIn q, MatIn k, MatIn v, const std::vector<std::int64_t>& qpos,
                           const std::vector<std::int64_t>& kpos, std::int64_t heads, MatrixRM& m,
                           MatrixRM& l, MatrixRM& acc) {
  const auto local = static_cast<std::int64_t>(qpos.size());
  const std::int64_t dh = q.cols() / heads, sequences = q.rows() / local;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  std::vector<float> score(static_cast<std::size_t>(local));
  std::int64_t pairs = 0;
  for (std::int64_t b = 0; b < sequences; ++b)
    for (std::int64_t i = 0; i < local; ++i) {
      const std::int64_t row = b * local + i;
      for (std::int64_t h = 0; h < heads; ++h) {
        float block_max = -std::numeric_limits<float>::infinity();
        bool any = false;
        for (std::int64_t j = 0; j < local; ++j) {
          if (!sees(qpos[static_cast<std::size_t>(i)], kpos[static_cast<std::size_t>(j)])) continue;
          const float s =
              scale * q.row(row).segment(h * dh, dh).dot(k.row(b * local + j).segment(h * dh, dh));
          score[static_cast<std::size_t>(j)] = s;
          block_max = std::max(block_max, s);
          any = true;
          if (h == 0) ++pairs;  // a pair is charged once, for all its heads
        }
        if (!any) continue;
        const float m_old = m(row, h), m_new = std::max(m_old, block_max);
        const float rescale = std::exp(m_old - m_new);  // 0 on the first block (m_old = -inf)
        l(row, h) *= rescale;
        acc.row(row).segment(h * dh, dh) *= rescale;
        for (std::int64_t j = 0; j < local; ++j) {
          if (!sees(qpos[static_cast<std::size_t>(i)], kpos[static_cast<std::size_t>(j)])) continue;
          const float p = std::exp(score[static_cast<std::size_t>(j)] - m_new);
          l(row, h) += p;
          acc.row(row).segment(h * dh, dh) += p * v.row(b * local + j).segment(h * dh, dh);
        }
        m(row, h) = m_new;
      }
    }
  return pairs;
}

// The backward of one block: with the saved log-sum-exp each probability is exact, so dq
// gains this block's share and dk, dv (the block's own gradients) gain this rank's queries'.
// d_row[row, h] = dO . O of the query, the softmax's correction term. Returns the pairs.
std::int64_t backward_block(const RingCache& cache, MatIn d_out, MatIn d_row, MatIn k, MatIn v,
                            const std::vector<std::int64_t>& qpos,
                            const std::vector<std::int64_t>& kpos, std::int64_t heads, MatOut dq,
                            MatOut dk, MatOut dv) {
  const auto local = static_cast<std::int64_t>(qpos.size());
  const auto rows = static_cast<std::size_t>(cache.rows), w = static_cast<std::size_t>(cache.width);
  const auto q = as_matrix(cache.q.span(), rows, w);
  const auto lse = as_matrix(cache.lse.span(), rows, static_cast<std::size_t>(heads));
  const std::int64_t dh = cache.width / heads, sequences = cache.rows / local;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  std::int64_t pairs = 0;
  for (std::int64_t b = 0; b < sequences; ++b)
    for (std::int64_t i = 0; i < local; ++i) {
      const std::int64_t row = b * local + i;
      for (std::int64_t j = 0; j < local; ++j) {
        if (!sees(qpos[static_cast<std::size_t>(i)], kpos[static_cast<std::size_t>(j)])) continue;
        const std::int64_t key = b * local + j;
        ++pairs;
        for (std::int64_t h = 0; h < heads; ++h) {
          const auto qi = q.row(row).segment(h * dh, dh);
          const auto doi = d_out.row(row).segment(h * dh, dh);
          const float p = std::exp(scale * qi.dot(k.row(key).segment(h * dh, dh)) - lse(row, h));
          dv.row(key).segment(h * dh, dh) += p * doi;
          const float ds = p * (doi.dot(v.row(key).segment(h * dh, dh)) - d_row(row, h));
          dq.row(row).segment(h * dh, dh) += scale * ds * k.row(key).segment(h * dh, dh);
          dk.row(key).segment(h * dh, dh) += scale * ds * qi;
        }
      }
    }
  return pairs;
}

// A (rows, hd) matrix and its neighbour packed in one message: [first | second].
void pack(Buffer<float>& into, MatIn first, MatIn second) {
  const auto r = static_cast<std::size_t>(first.rows()), w = static_cast<std::size_t>(first.cols());
  as_matrix(into, r, w) = first;
  as_matrix(into, r, w, r * w) = second;
}

void check_same(const char* where, const char* name, MatIn m, std::int64_t rows,
                std::int64_t cols) {
  if (m.rows() != rows || m.cols() != cols)
    args::fail(where, name, "(" + std::to_string(m.rows()) + ", " + std::to_string(m.cols()) + ")",
               "must be (" + std::to_string(rows) + ", " + std::to_string(cols) + ") like q");
}

}  // namespace

std::vector<std::int64_t> cp_positions(std::int64_t seq, int ranks, int rank, Split split) {
  const char* where = "cp_positions";
  args::check_count(where, "seq", seq);
  args::check_count(where, "ranks", ranks);
  if (rank < 0 || rank >= ranks)
    args::fail(where, "rank", std::to_string(rank),
               "is outside [0, " + std::to_string(ranks) + ")");
  const std::int64_t pieces = split == Split::zigzag ? 2 * ranks : ranks;
  if (seq % pieces != 0)
    args::fail(where, "seq", std::to_string(seq),
               "is not divisible by " + std::to_string(pieces) + " chunks of the split");
  const std::int64_t len = seq / pieces;
  std::vector<std::int64_t> chunks{rank};
  if (split == Split::zigzag) chunks.push_back(2 * ranks - 1 - rank);
  std::vector<std::int64_t> positions;
  for (std::int64_t chunk : chunks)
    for (std::int64_t i = 0; i < len; ++i) positions.push_back(chunk * len + i);
  return positions;
}

RingCache ring_attention_forward(Rank& rank, Comm& cp, const CpShape& shape, MatIn q, MatIn k,
                                 MatIn v, MatOut out) {
  const char* where = "ring_attention_forward";
  check_cp_shape(where, shape, cp.size(), q);
  check_same(where, "k", k, q.rows(), q.cols());
  check_same(where, "v", v, q.rows(), q.cols());
  check_same(where, "out", out, q.rows(), q.cols());
  const int c = cp.size(), me = cp.rank(), next = (me + 1) % c, prev = (me + c - 1) % c;
  const auto rows = static_cast<std::size_t>(q.rows()), w = static_cast<std::size_t>(q.cols());
  const auto heads = static_cast<std::size_t>(shape.heads);
  const std::vector<std::int64_t> qpos = cp_positions(shape.seq, c, me, shape.split);

  RingCache cache{q.rows(),
                  q.cols(),
                  Buffer<float>(rank.memory(), Category::activations, rows * w, "cp q"),
                  Buffer<float>(rank.memory(), Category::activations, rows * w, "cp k"),
                  Buffer<float>(rank.memory(), Category::activations, rows * w, "cp v"),
                  Buffer<float>(rank.memory(), Category::activations, rows * w, "cp out"),
                  Buffer<float>(rank.memory(), Category::activations, rows * heads, "cp lse")};
  as_matrix(cache.q, rows, w) = q;
  as_matrix(cache.k, rows, w) = k;
  as_matrix(cache.v, rows, w) = v;

  // Running statistics of the online softmax, per query and head (temporaries of this call).
  MatrixRM m = MatrixRM::Constant(q.rows(), shape.heads, -std::numeric_limits<float>::infinity());
  MatrixRM l = MatrixRM::Zero(q.rows(), shape.heads), acc = MatrixRM::Zero(q.rows(), q.cols());

  Buffer<float> visiting(rank.memory(), Category::comm, 2 * rows * w, "cp keys and values");
  pack(visiting, k, v);
  for (int step = 0; step < c; ++step) {
    const int owner = (me - step + c) % c;  // whose keys and values are here now
    // Pass the block on before using it, so the transfer overlaps this step's compute.
    Request sent, arrived;
    Buffer<float> incoming;
    if (step < c - 1) {
      sent = cp.isend(visiting, next, kKeysTag);
      incoming = Buffer<float>(rank.memory(), Category::comm, 2 * rows * w, "cp keys and values");
      arrived = cp.irecv(incoming, prev, kKeysTag);
    }
    const std::int64_t pairs =
        forward_block(q, as_matrix(visiting, rows, w), as_matrix(visiting, rows, w, rows * w), qpos,
                      cp_positions(shape.seq, c, owner, shape.split), shape.heads, m, l, acc);
    if (pairs > 0) rank.compute(4.0 * static_cast<double>(pairs) * q.cols(), "cp attention fwd");
    if (step < c - 1) {
      arrived.wait();
      sent.wait();
      visiting = std::move(incoming);
    }
  }

  const std::int64_t dh = q.cols() / shape.heads;
  auto lse = as_matrix(cache.lse, rows, heads);
  for (std::int64_t row = 0; row < q.rows(); ++row)
    for (std::int64_t h = 0; h < shape.heads; ++h) {
      out.row(row).segment(h * dh, dh) = acc.row(row).segment(h * dh, dh) / l(row, h);
      lse(row, h) = m(row, h) + std::log(l(row, h));
    }
  as_matrix(cache.out, rows, w) = out;
  return cache;
}

void ring_attention_backward(Rank& rank, Comm& cp, const CpShape& shape, const RingCache& cache,
                             MatIn d_out, MatOut dq, MatOut dk, MatOut dv) {
  const char* where = "ring_attention_backward";
  check_cp_shape(where, shape, cp.size(), d_out);
  check_same(where, "d_out", d_out, cache.rows, cache.width);
  check_same(where, "dq", dq, cache.rows, cache.width);
  check_same(where, "dk", dk, cache.rows, cache.width);
  check_same(where, "dv", dv, cache.rows, cache.width);
  const int c = cp.size(), me = cp.rank(), next = (me + 1) % c, prev = (me + c - 1) % c;
  const auto rows = static_cast<std::size_t>(cache.rows), w = static_cast<std::size_t>(cache.width);
  const std::int64_t heads = shape.heads, dh = cache.width / heads;
  const std::vector<std::int64_t> qpos = cp_positions(shape.seq, c, me, shape.split);

  // dO . O per query and head: the softmax backward's correction, the same for every block.
  const auto o = as_matrix(cache.out.span(), rows, w);
  MatrixRM d_row(cache.rows, heads);
  for (std::int64_t row = 0; row < cache.rows; ++row)
    for (std::int64_t h = 0; h < heads; ++h)
      d_row(row, h) = d_out.row(row).segment(h * dh, dh).dot(o.row(row).segment(h * dh, dh));

  dq.setZero();
  dk.setZero();
  dv.setZero();
  Buffer<float> visiting(rank.memory(), Category::comm, 2 * rows * w, "cp keys and values");
  pack(visiting, as_matrix(cache.k.span(), rows, w), as_matrix(cache.v.span(), rows, w));
  Buffer<float> grads;  // the visiting block's dk, dv, summed over the ranks it has visited
  for (int step = 0; step < c; ++step) {
    const int owner = (me - step + c) % c;
    Request sent, arrived;
    Buffer<float> incoming;
    if (step < c - 1) {
      sent = cp.isend(visiting, next, kKeysTag);
      incoming = Buffer<float>(rank.memory(), Category::comm, 2 * rows * w, "cp keys and values");
      arrived = cp.irecv(incoming, prev, kKeysTag);
    }
    // The own block's gradients go straight into dk, dv; a visitor's into its travelling sums,
    // which start on the first rank after the owner and arrive from the previous rank after.
    if (step == 1) grads = Buffer<float>(rank.memory(), Category::comm, 2 * rows * w, "cp grads");
    if (step >= 2) cp.recv(grads, prev, kGradTag);
    const auto kv = as_matrix(visiting, rows, w);
    const auto vv = as_matrix(visiting, rows, w, rows * w);
    const std::vector<std::int64_t> kpos = cp_positions(shape.seq, c, owner, shape.split);
    std::int64_t pairs = 0;
    if (step == 0) {
      pairs = backward_block(cache, d_out, d_row, kv, vv, qpos, kpos, heads, dq, dk, dv);
    } else {
      auto gk = as_matrix(grads, rows, w);
      auto gv = as_matrix(grads, rows, w, rows * w);
      pairs = backward_block(cache, d_out, d_row, kv, vv, qpos, kpos, heads, dq, gk, gv);
      cp.isend(grads, next, kGradTag);  // buffered: the data is copied now
    }
    // 10 hd per pair: the scores rebuilt (2 hd), then dV, dP, dQ and dK (2 hd each).
    if (pairs > 0)
      rank.compute(10.0 * static_cast<double>(pairs) * cache.width, "cp attention bwd");
    if (step < c - 1) {
      arrived.wait();
      sent.wait();
      visiting = std::move(incoming);
    }
  }
  // The last hop brings every block's sums home: the owner adds them to its own queries' share.
  if (c > 1) {
    Buffer<float> home(rank.memory(), Category::comm, 2 * rows * w, "cp grads home");
    cp.recv(home, prev, kGradTag);
    dk += as_matrix(home, rows, w);
    dv += as_matrix(home, rows, w, rows * w);
  }
}

double cp_forward_bytes_per_rank(std::int64_t sequences, std::int64_t seq, std::int64_t width,
                                 int ranks, Split split) {
  check_sizes("cp_forward_bytes_per_rank", sequences, seq, width, 1, ranks, split);
  // c - 1 hops of this rank's keys and values, s/c tokens of each sequence.
  return static_cast<double>(ranks - 1) * 2.0 * static_cast<double>(sequences * (seq / ranks)) *
         static_cast<double>(width) * kBytes;
}

double cp_backward_bytes_per_rank(std::int64_t sequences, std::int64_t seq, std::int64_t width,
                                  int ranks, Split split) {
  check_sizes("cp_backward_bytes_per_rank", sequences, seq, width, 1, ranks, split);
  // The keys and values again, and their two gradients beside them.
  return static_cast<double>(ranks - 1) * 4.0 * static_cast<double>(sequences * (seq / ranks)) *
         static_cast<double>(width) * kBytes;
}

double cp_saved_activation_bytes_per_rank(std::int64_t sequences, std::int64_t seq,
                                          std::int64_t width, std::int64_t heads, int ranks,
                                          Split split) {
  check_sizes("cp_saved_activation_bytes_per_rank", sequences, seq, width, heads, ranks, split);
  // q, k, v, out of width each and one log-sum-exp per head, for s/c tokens per sequence.
  return static_cast<double>(sequences * (seq / ranks)) * static_cast<double>(4 * width + heads) *
         kBytes;
}

double cp_attention_flops(std::int64_t sequences, std::int64_t seq, std::int64_t width, int ranks,
                          int rank, Split split) {
  check_sizes("cp_attention_flops", sequences, seq, width, 1, ranks, split);
  // A query at position p sees the p + 1 keys at 0..p.
  double pairs = 0;
  for (std::int64_t p : cp_positions(seq, ranks, rank, split)) pairs += static_cast<double>(p + 1);
  return 4.0 * static_cast<double>(width) * static_cast<double>(sequences) * pairs;
}

}  // namespace mgpu::context
