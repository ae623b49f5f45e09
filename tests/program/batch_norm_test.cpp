// BatchNorm in generic layers: the model files' parameters, the kernels of a pass and its
// SyncBN pieces, and the Program's collectives under SyncBN, against counts and sizes
// worked out by hand from ResNet-18's layout.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "workload/accounting.hpp"
#include "workload/kernels.hpp"
#include "scenario/load.hpp"
#include "program_helpers.hpp"

using namespace parasim::scenario;
using namespace parasim::workload;
using namespace parasim::program;
using parasim::program::test::compute_flops;
using parasim::program::test::unfinished;

namespace {

Scenario resnet(std::vector<std::string> sets) {
  return load_text("cluster: dgx-a100\nmodel: resnet18\ntraining: {global_batch: 256, micro_batch: 32}\nplan: {dp: 4}\n",
                   "r.yaml", sets);
}

double kernel_bytes(const std::vector<Kernel>& ks, std::string_view prefix) {
  double sum = 0.0;
  for (const Kernel& k : ks) {
    if (k.kind == KernelKind::memory && k.name.substr(0, prefix.size()) == prefix) sum += k.bytes;
  }
  return sum;
}

}  // namespace

TEST_CASE("ResNet-18's BatchNorms: one per convolution, their scales and shifts in the parameters", "[bn]") {
  const Scenario s = resnet({});
  const auto& l = s.model.generic_layers;
  REQUIRE(l.size() == 6);
  // The stem's one, four per stage of two basic blocks, and the shortcut's in stages 2-4.
  const int layers[] = {1, 4, 5, 5, 5, 0};
  const int channels[] = {64, 64, 128, 256, 512, 0};
  double bn_params = 0.0;
  for (std::size_t i = 0; i < l.size(); ++i) {
    CHECK(l[i].batch_norm.layers == layers[i]);
    CHECK(l[i].batch_norm.channels == channels[i]);
    bn_params += l[i].batch_norm.params();
  }
  CHECK(bn_params == 2.0 * (64 + 4 * 64 + 5 * 128 + 5 * 256 + 5 * 512));  // 9,600
  CHECK(s.model.parameter_count() == 11689512.0);
  // Each output normalised once: the stem's 64 x 112 x 112, stage 2's five of 128 x 28 x 28.
  CHECK(l[0].batch_norm.values == 64.0 * 112 * 112);
  CHECK(l[2].batch_norm.values == 5.0 * 128 * 28 * 28);
}

TEST_CASE("a BatchNorm layer's kernels: three passes forward and five backward, which SyncBN's pieces add up to", "[bn]") {
  const Scenario s = resnet({"training.batch_norm=sync"});
  const KernelPlan p = kernel_plan(s);
  REQUIRE(p.bn_members == 4);
  const GenericLayer& l = s.model.generic_layers[2];  // five BN layers of 128 channels
  const double one = l.batch_norm.values / 5 * 32 * p.element;  // one BN layer's values, in bytes
  const auto forward = generic_layer_kernels(p, l, false);
  const auto backward = generic_layer_kernels(p, l, true);
  CHECK(kernel_bytes(forward, "bn-stats") == Approx(5 * one));
  CHECK(kernel_bytes(forward, "bn-normalize") == Approx(5 * 2 * one));
  CHECK(kernel_bytes(backward, "bn-backward") == Approx(5 * 5 * one));
  // A recompute normalises with the statistics its forward kept.
  CHECK(kernel_bytes(generic_layer_kernels(p, l, false, recompute_layer), "bn-stats") == 0.0);
  // The six pieces hold the whole pass's kernels, plus SyncBN's packing, masking and merging.
  std::vector<Kernel> pieces[2];
  for (int k = 0; k <= 5; ++k) {
    for (int b = 0; b < 2; ++b) {
      const auto ks = generic_layer_kernels(p, l, b == 1, k);
      pieces[b].insert(pieces[b].end(), ks.begin(), ks.end());
      // The GEMM in the first piece (forward) or the last one run (backward: piece 0).
      const bool gemm = std::any_of(ks.begin(), ks.end(), [](const Kernel& x) { return x.kind == KernelKind::gemm; });
      CHECK(gemm == (k == 0));
    }
  }
  for (std::string_view name : {"bn-stats", "bn-normalize", "activation"}) CHECK(kernel_bytes(pieces[0], name) == kernel_bytes(forward, name));
  for (std::string_view name : {"bn-backward", "activation-grad"}) CHECK(kernel_bytes(pieces[1], name) == kernel_bytes(backward, name));
  CHECK(pieces[0].size() == forward.size() + 5 * 3);   // pack; mask and merge
  CHECK(pieces[1].size() == backward.size() + 5 * 1);  // pack
}

TEST_CASE("SyncBN: an all-gather of every member's statistics forward, an all-reduce of the sums backward, per BN layer", "[bn]") {
  const Scenario s = resnet({"training.batch_norm=sync"});
  REQUIRE(s.syncs_batch_norm());
  const Program prog = compile(s);
  CHECK(unfinished(prog) == 0);
  const int micro_batches = s.micro_batches();  // 256 / (4 x 32) = 2
  REQUIRE(micro_batches == 2);
  std::map<std::pair<int, CollectiveOp>, int> count;  // (layer, collective) on rank 0
  for (std::int64_t id : prog.order[0]) {
    const Op& o = prog.ops[static_cast<std::size_t>(id)];
    if (o.category != Category::bn_comm) continue;
    ++count[{o.layer, o.collective}];
    const double c = s.model.generic_layers[static_cast<std::size_t>(o.layer)].batch_norm.channels;
    CHECK(o.stream == Stream::dp);
    CHECK(prog.groups[static_cast<std::size_t>(o.group)].ranks.size() == 4);
    if (o.collective == CollectiveOp::all_gather) {
      CHECK(o.bytes == 4 * (2 * c + 1) * 4);  // (mean, invstd per channel, count) in fp32, four members
      CHECK(o.pass == Category::forward);
      CHECK(o.host_sync);
    } else {
      CHECK(o.collective == CollectiveOp::all_reduce);
      CHECK(o.bytes == 2 * c * 4);
      CHECK(o.pass == Category::backward);
      CHECK_FALSE(o.host_sync);
    }
    // Between two pieces of the same layer and micro-batch: it waits for the one before,
    // the one after waits for it.
    const auto deps = prog.deps_of(id);
    REQUIRE(deps.size() == 1);
    const Op& before = prog.ops[static_cast<std::size_t>(deps[0])];
    CHECK(before.kind == OpKind::compute);
    CHECK(before.layer == o.layer);
    CHECK(before.micro_batch == o.micro_batch);
    CHECK(before.piece == LayerPiece::block);
    CHECK(before.step == (o.pass == Category::forward ? o.step : o.step + 1));
  }
  for (int layer = 0; layer < 6; ++layer) {
    const int n = s.model.generic_layers[static_cast<std::size_t>(layer)].batch_norm.layers;
    CHECK(count[{layer, CollectiveOp::all_gather}] == n * micro_batches);
    CHECK(count[{layer, CollectiveOp::all_reduce}] == n * micro_batches);
  }
  CHECK(op_name(prog, [&] {
          for (std::int64_t id : prog.order[0]) {
            if (prog.ops[static_cast<std::size_t>(id)].category == Category::bn_comm) return id;
          }
          return std::int64_t{-1};
        }()) == "syncbn all-gather stats #0 L0 mb0");
  // The same FLOPs as per-rank BatchNorm, which has no such collectives.
  const Program local = compile(resnet({}));
  CHECK(compute_flops(prog) == Approx(compute_flops(local)).epsilon(1e-12));
  CHECK(std::none_of(local.ops.begin(), local.ops.end(), [](const Op& o) { return o.category == Category::bn_comm; }));
  // The pieces carry the whole pass's memory traffic.
  auto compute_bytes = [](const Program& p) {
    double b = 0.0;
    for (const Op& o : p.ops) {
      if (o.kind == OpKind::compute && o.category != Category::optimizer) b += o.bytes;
    }
    return b;
  };
  CHECK(compute_bytes(prog) == Approx(compute_bytes(local)).epsilon(1e-12));
}
