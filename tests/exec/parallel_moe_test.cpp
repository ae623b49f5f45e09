// The executor's mixture of experts over ranks against the serial model: every expert on
// each rank, expert parallelism's token all-to-alls (and the all-to-all alone), experts
// split over tp. Run under MPI as parallel_test.cpp's tests are.
#include "tests/exec/parallel_helpers.hpp"

using namespace parasim;
using namespace parasim::exec;
using namespace parasim::test::parallel;

TEST_CASE("a mixture of experts: the shard routes and trains as the reference model", "[exec][np1][moe]") {
  // 4 experts of width 48, each token to 2: the router's choice, the experts' GEMMs over
  // their rows and the gates' sums (and every gradient) as Gpt<float>'s.
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48"});
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "training.recompute=full"});
}

TEST_CASE("a mixture of experts under context parallelism and ZeRO-3 equals the serial run", "[exec][np2][moe]") {
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "plan.cp=2"});
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "plan.dp=2", "plan.zero=3"}, false);
}

TEST_CASE("an all-to-all moves each member's block, of any size or none, to that member", "[exec][np2][np4]") {
  Device& dev = device();
  const int n = dev.world(), me = dev.rank();
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    all[static_cast<std::size_t>(r)] = n - 1 - r;  // members in reverse: member i is rank n-1-i
  const Comm comm = dev.comm_create(all, 900);
  const int mine = n - 1 - me;  // this rank's place among the members
  auto size = [](int from, int to) { return static_cast<std::int64_t>((from + 2 * to) % 3); };  // 0, 1 or 2 values
  auto value = [](int from, int to, int i) { return static_cast<float>(1000 * from + 10 * to + i); };
  std::vector<std::int64_t> send_counts, recv_counts;
  std::vector<float> send;
  for (int j = 0; j < n; ++j) {
    send_counts.push_back(size(mine, j));
    recv_counts.push_back(size(j, mine));
    for (int i = 0; i < size(mine, j); ++i) send.push_back(value(mine, j, i));
  }
  std::vector<float> want;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < size(j, mine); ++i) want.push_back(value(j, mine, i));
  }
  Buffer a = dev.allocate_floats(send.size() + 1), b = dev.allocate_floats(want.size() + 1);
  dev.upload(a.f(), send.data(), send.size() * sizeof(float));
  dev.wait(dev.all_to_all(a.f(), send_counts, b.f(), recv_counts, comm));
  std::vector<float> got(want.size());
  dev.download(got.data(), b.f(), got.size() * sizeof(float));
  CHECK(got == want);
}

TEST_CASE("expert parallelism 2: tokens dispatched to their experts' ranks and combined back equal the serial run",
          "[exec][np2][moe]") {
  // Each rank holds 2 of the 4 experts and routes its own tokens: the all-to-alls carry the
  // rows (a varying number per expert, step by step), the router's gradient is summed over
  // dp, each expert's stays with its one holder.
  const std::vector<std::string> ep{"model.experts=4", "model.expert_ffn_hidden=48", "plan.dp=2", "plan.ep=2"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), ep.begin(), ep.end());
    return more;
  };
  matches_serial(ep);
  matches_serial(with({"training.recompute=full"}));
  matches_serial(with({"model.top_k=1", "model.experts=8"}));  // 4 experts a rank, some with no rows
  matches_serial(with({"plan.zero=1", "plan.bucket_size=16KiB"}), false);
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "plan.cp=2", "plan.ep=2"});  // ep over cp ranks
}

TEST_CASE("experts split over tp 2: each rank routes its rows, the tp group's rows gathered and their sums scattered",
          "[exec][np2][moe]") {
  // Sequence parallelism (as Megatron-Core requires): each tp rank routes its half of the
  // rows; the experts' first GEMM is split by columns, the second by rows, so the outputs
  // are partial sums, reduce-scattered back to their rows' ranks; the router's gradient is
  // each rank's rows', summed over tp with the norms'.
  const std::vector<std::string> tp{"model.experts=4", "model.expert_ffn_hidden=48", "plan.tp=2",
                                    "plan.sequence_parallel=true"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), tp.begin(), tp.end());
    return more;
  };
  matches_serial(tp);
  matches_serial(with({"training.recompute=full"}));
  matches_serial(with({"model.top_k=1", "model.experts=8"}));
}

TEST_CASE("experts over tp 2 and ep 2 together, and with pp", "[exec][np4][moe]") {
  const std::vector<std::string> tp{"model.experts=4", "model.expert_ffn_hidden=48", "plan.tp=2",
                                    "plan.sequence_parallel=true"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), tp.begin(), tp.end());
    return more;
  };
  matches_serial(with({"plan.dp=2", "plan.ep=2"}));
  matches_serial(with({"plan.dp=2", "plan.ep=2", "training.recompute=full"}));
  matches_serial(with({"plan.dp=2"}));  // every expert on each tp pair, their gradients summed over dp
  matches_serial(with({"plan.pp=2"}));
}

TEST_CASE("expert parallelism with dp 4, pp and ZeRO-1: each expert's gradient summed over its holders",
          "[exec][np4][moe]") {
  const std::vector<std::string> moe{"model.experts=4", "model.expert_ffn_hidden=48"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), moe.begin(), moe.end());
    return more;
  };
  matches_serial(with({"plan.dp=4", "plan.ep=4"}));
  matches_serial(with({"plan.dp=4", "plan.ep=2"}));  // every expert on two ranks: an expert all-reduce
  matches_serial(with({"plan.dp=4", "plan.ep=2", "plan.zero=1", "plan.bucket_size=16KiB"}), false);
  matches_serial(with({"plan.dp=2", "plan.pp=2", "plan.ep=2", "plan.schedule=1f1b"}));
  matches_serial(with({"plan.dp=2", "plan.cp=2", "plan.ep=4", "training.recompute=full"}));
}

TEST_CASE("a mixture of experts over data and pipeline parallelism equals the serial run", "[exec][np4][moe]") {
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "plan.dp=2", "plan.pp=2"});
  matches_serial({"model.experts=4", "model.expert_ffn_hidden=48", "model.top_k=1", "plan.dp=4", "plan.zero=1"}, false);
}
