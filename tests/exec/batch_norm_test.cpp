// BatchNorm in generic layers on the executor, against the serial GenericNet: per-rank
// statistics (each micro-batch its own) and SyncBN (the same micro-batch of every dp
// replica together), with pipeline stages, recompute and ZeRO. Run under MPI like
// parallel_test.cpp.
#include "scenario/load.hpp"
#include "tests/exec/parallel_helpers.hpp"

using namespace parasim;
using namespace parasim::exec;
using namespace parasim::test::parallel;

TEST_CASE("BatchNorm layers on one rank equal GenericNet, with and without recompute", "[exec][np1][generic][bn]") {
  cnn_bn_matches_serial({});
  cnn_bn_matches_serial({"training.recompute=full"});
  // SyncBN with one replica has nothing to synchronise: the same run, no collectives.
  cnn_bn_matches_serial({"training.batch_norm=sync"});
  const program::Program prog = program::compile(cnn_bn({"training.batch_norm=sync"}));
  CHECK(std::none_of(prog.ops.begin(), prog.ops.end(),
                     [](const program::Op& o) { return o.category == program::Category::bn_comm; }));
}

TEST_CASE("BatchNorm layers learn the synthetic classes: the loss falls over 60 steps", "[exec][np1][generic][bn]") {
  const Outcome got = parallel(cnn_bn({"training.learning_rate=0.01"}), 60);
  // Ten classes: chance is ln 10 = 2.30. The last ten steps' mean, as single steps of four
  // micro-batches of two samples are noisy.
  double last = 0.0;
  for (std::size_t i = got.losses.size() - 10; i < got.losses.size(); ++i) last += got.losses[i] / 10.0;
  UNSCOPED_INFO("loss " << got.losses.front() << " -> " << last);
  CHECK(last < 0.5 * std::log(10.0));
  CHECK(last < 0.5 * got.losses.front());
}

TEST_CASE("BatchNorm over dp 2: per-replica statistics and SyncBN each equal their serial model", "[exec][np2][generic][bn]") {
  cnn_bn_matches_serial({"plan.dp=2"});
  cnn_bn_matches_serial({"plan.dp=2", "training.batch_norm=sync"});
  cnn_bn_matches_serial({"plan.dp=2", "training.batch_norm=sync", "training.recompute=full"});
  cnn_bn_matches_serial({"plan.dp=2", "training.batch_norm=sync", "plan.bucket_size=4KiB"});  // buckets between the exchanges
  cnn_bn_matches_serial({"plan.dp=2", "training.batch_norm=sync", "plan.zero=2"}, false);
  cnn_bn_matches_serial({"plan.pp=2", "plan.schedule=1f1b", "training.batch_norm=sync"});
  // The two differ: SyncBN normalises by statistics over both replicas' samples.
  const Outcome local = parallel(cnn_bn({"plan.dp=2"}), 2);
  const Outcome sync = parallel(cnn_bn({"plan.dp=2", "training.batch_norm=sync"}), 2);
  CHECK(std::abs(local.losses[1] - sync.losses[1]) > 1e-4);
  CHECK(max_abs_difference(local.params, sync.params) > 1e-6);
}

TEST_CASE("SyncBN over dp 4 and dp 2 x pp 2 equals the serial model", "[exec][np4][generic][bn]") {
  // One sample per rank: per-rank BatchNorm1d would see a single value per channel; SyncBN
  // normalises over the four.
  cnn_bn_matches_serial({"plan.dp=4", "training.micro_batch=1", "training.batch_norm=sync"});
  cnn_bn_matches_serial({"plan.dp=2", "plan.pp=2", "training.batch_norm=sync"});
  cnn_bn_matches_serial({"plan.dp=2", "plan.pp=2", "plan.schedule=interleaved-1f1b", "plan.virtual_stages=2",
                         "training.batch_norm=sync"});
}
