// Megatron-LM's arguments read back as settings: each argument's key and value, the shell's
// quoting and line joins, torchrun's GPU count, and errors that name the line and argument.
#include "scenario/megatron.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "scenario/diagnostics.hpp"
#include "scenario/load.hpp"

using namespace parasim::scenario;

namespace {
bool has(const MegatronImport& m, const std::string& set) {
  return std::find(m.sets.begin(), m.sets.end(), set) != m.sets.end();
}
}  // namespace

TEST_CASE("a Megatron-LM launch line becomes the model, batch, precision and plan settings", "[plan][megatron]") {
  const std::string script = R"(#!/bin/bash
# Llama-3-8B-like on 2 nodes
torchrun --nnodes 2 --nproc_per_node=8 pretrain_gpt.py \
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 \
  --num-attention-heads 32 --group-query-attention --num-query-groups 8 \
  --seq-length 8192 --max-position-embeddings 8192 --vocab-size 128256 \
  --swiglu --normalization RMSNorm --untie-embeddings-and-output-weights \
  --micro-batch-size 1 --global-batch-size 128 --bf16 --use-flash-attn \
  --recompute-granularity selective --lr 3e-4 \
  --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 4 --sequence-parallel \
  --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 40000000 \
  --train-iters 1000 --save "/ckpt/run one" --data-path /data/x
)";
  const MegatronImport m = read_megatron_arguments(script, "launch.sh");
  CHECK(m.gpus == 16);  // 2 nodes x 8
  CHECK(m.tp == 4);
  CHECK(m.pp == 2);
  for (const char* set : {"model.layers=32",
                          "model.hidden=4096",
                          "model.ffn_hidden=14336",
                          "model.heads=32",
                          "model.kv_heads=8",
                          "model.seq_len=8192",
                          "model.vocab=128256",
                          "model.mlp=swiglu",
                          "model.tie_embeddings=false",
                          "training.micro_batch=1",
                          "training.global_batch=128",
                          "training.precision=bf16",
                          "training.attention=flash",
                          "training.recompute=selective",
                          "training.learning_rate=0.0003",
                          "plan.tp=4",
                          "plan.pp=2",
                          "plan.virtual_stages=4",
                          "plan.schedule=interleaved-1f1b",
                          "plan.sequence_parallel=true",
                          "plan.zero=1",
                          "plan.overlap_dp=true",
                          "plan.bucket_size=160000000B"}) {
    INFO(set);
    CHECK(has(m, set));
  }
  // 32 layers over 2 stages of 4 virtual chunks: 4 layers each.
  // What parasim does not model is listed, quoted values whole.
  CHECK(m.ignored == std::vector<std::string>{"--data-path /data/x", "--save /ckpt/run one", "--train-iters 1000"});
}

TEST_CASE("what export --megatron writes reads back as the scenario's settings", "[plan][megatron]") {
  const MegatronImport m = read_megatron_arguments(
      "--num-layers 61 --hidden-size 7168 --num-attention-heads 128 --seq-length 4096 --vocab-size 129280 \\\n"
      "--num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048 --moe-layer-freq '([0]*3+[1]*58)' \\\n"
      "--multi-latent-attention --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 \\\n"
      "--fp16 --initial-loss-scale 65536 --expert-model-parallel-size 16\n",
      "args.txt");
  for (const char* set :
       {"model.experts=256", "model.top_k=8", "model.expert_ffn_hidden=2048", "model.dense_layers=3",
        "model.kv_lora_rank=512", "model.qk_nope_head_dim=128", "model.qk_rope_head_dim=64", "model.v_head_dim=128",
        "training.precision=fp16", "training.loss_scale=65536", "plan.ep=16"}) {
    INFO(set);
    CHECK(has(m, set));
  }
  CHECK(m.gpus == 0);  // no torchrun: the command line says how many
}

TEST_CASE("a bad Megatron argument is named with its line and column", "[plan][megatron]") {
  try {
    (void)read_megatron_arguments("--num-layers 32 \\\n  --hidden-size big --num-attention-heads 8 --seq-length 512",
                                  "a.sh");
    FAIL("no error");
  } catch (const ScenarioError& e) {
    CHECK(std::string(e.what()) == "a.sh:2:3: --hidden-size: expected a whole number, got 'big'");
  }
  CHECK_THROWS_WITH(read_megatron_arguments("--num-layers 4 --hidden-size 64 --num-attention-heads 4", "a.sh"),
                    Catch::Contains("--seq-length: missing"));
  CHECK_THROWS_WITH(
      read_megatron_arguments("--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 64", "a.sh"),
      Catch::Contains("--vocab-size: missing"));
  CHECK_THROWS_WITH(read_megatron_arguments("--num-layers 8 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
                                            "--vocab-size 100 --moe-layer-freq '([0]*3+[1]*6)'",
                                            "a.sh"),
                    Catch::Contains("with D + M = 8 layers"));
  // Counts past an int's digits: the same error at the flag, not std::stoi's out_of_range.
  CHECK_THROWS_WITH(read_megatron_arguments("--num-layers 8 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
                                            "--vocab-size 100 --moe-layer-freq '([0]*99999999999999999999+[1]*6)'",
                                            "a.sh"),
                    Catch::Contains("--moe-layer-freq") && Catch::Contains("with D + M = 8 layers"));
}

TEST_CASE("launch scripts written as Megatron-LM's examples are: variables, arrays, tokenizers", "[plan][megatron]") {
  const auto read = [](const std::string& name) {
    const std::string path = std::string(PARASIM_SOURCE_DIR) + "/tests/data/megatron/" + name;
    std::ifstream f(path);
    REQUIRE(f);
    std::stringstream text;
    text << f.rdbuf();
    return read_megatron_arguments(text.str(), path);
  };
  // examples/gpt3/train_gpt3_175b_distributed.sh's form: every setting comes from an array
  // or a variable; GPT-2's BPE files fix the vocabulary (50,257, padded to 128 x tp 8).
  const MegatronImport g = read("train_gpt3_175b_distributed.sh");
  CHECK(g.gpus == 128);  // ${NUM_NODES:-16} x 8
  CHECK(g.tp == 8);
  CHECK(g.pp == 16);
  for (const char* set : {"model.layers=96", "model.hidden=12288", "model.heads=96", "model.seq_len=2048",
                          "model.vocab=51200", "training.micro_batch=1", "training.global_batch=1536",
                          "training.precision=fp16", "training.recompute=selective", "plan.tp=8", "plan.pp=16",
                          "plan.virtual_stages=2", "plan.schedule=interleaved-1f1b", "plan.sequence_parallel=true"}) {
    INFO(set);
    CHECK(has(g, set));
  }
  // Without --overlap-grad-reduce Megatron-LM reduces after the backward: nothing set, and
  // training.framework megatron-lm defaults plan.overlap_dp to false (load_test).
  CHECK(has(g, "training.framework=megatron-lm"));
  CHECK_FALSE(has(g, "plan.overlap_dp=true"));
  // What it does not model is listed, with the values as the script gives them.
  CHECK(std::find(g.ignored.begin(), g.ignored.end(), "--clip-grad 1.0") != g.ignored.end());
  CHECK(std::find(g.ignored.begin(), g.ignored.end(), "--save $1") != g.ignored.end());
  // Strings expanded unquoted split into arguments; Llama 3's tokenizer fixes 128,256
  // words (a multiple of 128 x tp 2 already); partial recompute is said, not hidden.
  const MegatronImport l = read("llama3_8b_slurm.sh");
  for (const char* set : {"model.layers=32", "model.kv_heads=8", "model.vocab=128256", "model.mlp=swiglu",
                          "training.recompute=full", "plan.tp=2", "plan.pp=4", "plan.zero=1",
                          "plan.overlap_param_gather=true"}) {
    INFO(set);
    CHECK(has(l, set));
  }
  CHECK(std::any_of(l.notes.begin(), l.notes.end(),
                    [](const std::string& n) { return n.find("2 of each stage's 8 layers recomputed") != std::string::npos; }));
  // A variable the script never sets is named as one.
  CHECK_THROWS_WITH(read_megatron_arguments("--num-layers $LAYERS --hidden-size 64 --num-attention-heads 4 "
                                            "--seq-length 128 --vocab-size 1000",
                                            "x.sh"),
                    Catch::Contains("got '$LAYERS' (a variable this script does not set"));
  // A tokenizer whose vocabulary is not known here asks for --vocab-size.
  CHECK_THROWS_WITH(read_megatron_arguments("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
                                            "--tokenizer-type NullTokenizer",
                                            "x.sh"),
                    Catch::Contains("vocabulary of NullTokenizer is not known here; give --vocab-size"));
}
