#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=8 --gpus-per-node=8
# Llama 3 8B under Slurm, arguments in strings expanded unquoted (as many launch scripts
# do), the tokenizer from Hugging Face, partial full recompute.
MODEL_ARGS="--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 \
 --group-query-attention --num-query-groups 8 --seq-length 8192 --max-position-embeddings 8192 \
 --swiglu --normalization RMSNorm --untie-embeddings-and-output-weights"
TOKENIZER="--tokenizer-type HuggingFaceTokenizer --tokenizer-model meta-llama/Meta-Llama-3-8B"
PARALLEL="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4"
RECOMPUTE="--recompute-granularity full --recompute-method block --recompute-num-layers 2"
srun python pretrain_gpt.py $MODEL_ARGS $TOKENIZER $PARALLEL $RECOMPUTE \
  --micro-batch-size 1 --global-batch-size 256 --bf16 \
  --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather
