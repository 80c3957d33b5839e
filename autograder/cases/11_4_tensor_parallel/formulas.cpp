// Graded cases of 11.4's formulas: weights per tensor-parallel rank, all-reduces per block and
// the bytes each rank sends for them.
#include "11_4_tensor_parallel/formulas.hpp"
#include "case.hpp"

using namespace mgpu::grade;
namespace tp = mgpu::tensor_parallel;

MGPU_CASE("11_4.params_per_rank") {
  std::int64_t heads = ctx.pick<std::int64_t>({8, 16, 32, 64, 96});
  std::int64_t hidden = heads * ctx.pick<std::int64_t>({64, 128});
  std::int64_t ffn = 4 * hidden;
  std::vector<double> ffn_p, attn_p, block_p;
  for (std::int64_t t : {1, 2, 4, 8}) {
    ffn_p.push_back(tp::ffn_params_per_rank(hidden, ffn, t));
    attn_p.push_back(tp::attention_params_per_rank(hidden, heads, t));
    block_p.push_back(tp::block_params_per_rank(hidden, heads, ffn, t));
  }
  ctx.emit("ffn", ffn_p);
  ctx.emit("attention", attn_p);
  ctx.emit("block", block_p);
  ctx.emit_rejects("rejects_t_not_dividing_heads",
                   [&] { tp::attention_params_per_rank(hidden, heads, 3); });
}

MGPU_CASE("11_4.all_reduces_and_payload") {
  ctx.emit("all_reduces",
           std::vector<double>{static_cast<double>(tp::all_reduces_per_block(tp::Pass::forward)),
                               static_cast<double>(tp::all_reduces_per_block(tp::Pass::backward)),
                               static_cast<double>(tp::all_reduces_per_block(tp::Pass::both))});
  mgpu::TransformerShape s;
  s.seq = ctx.pick<std::int64_t>({512, 2048, 8192});
  s.micro_batch = ctx.uniform_int(1, 16);
  s.hidden = ctx.pick<std::int64_t>({1024, 4096, 8192, 12288});
  ctx.emit("payload_bytes", tp::all_reduce_payload_bytes(s, ctx.pick<double>({2, 4})));
  // A fixed shape with several sequences per micro-batch: the drawn micro-batch may be 1, where
  // a payload that leaves it out is right by chance.
  mgpu::TransformerShape fixed;
  fixed.seq = 2048;
  fixed.micro_batch = 4;
  fixed.hidden = 8192;
  ctx.emit("payload_bytes_fixed", tp::all_reduce_payload_bytes(fixed, 2));
}

MGPU_CASE("11_4.bytes_sent_per_rank") {
  mgpu::TransformerShape s;
  s.seq = ctx.pick<std::int64_t>({512, 2048, 8192});
  s.micro_batch = ctx.uniform_int(1, 16);
  s.hidden = ctx.pick<std::int64_t>({1024, 4096, 8192});
  std::vector<double> out;
  for (std::int64_t t : {1, 2, 4, 8})
    for (auto pass : {tp::Pass::forward, tp::Pass::backward, tp::Pass::both})
      out.push_back(tp::block_bytes_sent_per_rank(s, t, 2, pass));
  ctx.emit("bytes", out);
  // The same at a fixed shape with 4 sequences per micro-batch (the drawn one may be 1).
  mgpu::TransformerShape fixed;
  fixed.seq = 2048;
  fixed.micro_batch = 4;
  fixed.hidden = 8192;
  std::vector<double> fixed_bytes;
  for (std::int64_t t : {1, 2, 4, 8})
    for (auto pass : {tp::Pass::forward, tp::Pass::backward, tp::Pass::both})
      fixed_bytes.push_back(tp::block_bytes_sent_per_rank(fixed, t, 2, pass));
  ctx.emit("bytes_fixed", fixed_bytes);
}
