#!/usr/bin/env bash
# End-to-end checks of the parasim command line: exit codes (0 ok, 1 failure, 2 bad
# input, 3 a plan that does not fit under --require-fit, 4 validate past --max-error),
# messages naming file:line, JSON output, and no partial output file on error.
# Usage: cli_test.sh PARASIM SOURCE_DIR
set -u
parasim=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0

# expect CODE PATTERN -- COMMAND...: runs COMMAND, checks its exit code and that its
# combined output matches the extended regex PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$code" ] && grep -Eq -- "$pattern" <<<"$out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    printf 'FAILED: %s\n  expected exit %s and /%s/, got exit %s:\n%s\n' "$*" "$code" "$pattern" "$rc" "$out" | head -20
  fi
}

check() {  # check DESCRIPTION COMMAND...: the command must succeed
  local what=$1
  shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $what"; fi
}

q=$src/scenarios/quickstart.yaml
tests_mpirun() { "$src/tests/exec/mpirun.sh" "$@"; }

expect 0 "Usage|USAGE|usage" -- "$parasim" --help
expect 0 "^parasim [0-9.]+ \(git [0-9a-z-]+\), built with the simulator" -- "$parasim" --version
# The dashboard without a display: --help answers, a window says what is missing.
gui=$(dirname "$parasim")/../gui/parasim-gui
if [ -x "$gui" ]; then
  expect 0 "Usage: .*parasim-gui" -- env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM "$gui" --help
  expect 2 "parasim-gui: no display" -- env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM "$gui" "$q"
  # Batch use without a scenario ends at once; hostile inputs and outputs end with a reason.
  expect 0 "wrote .*01-" -- timeout 120 env QT_QPA_PLATFORM=offscreen "$gui" --export "$work/gui-views"
  expect 2 "/dev/zero: cannot read: not a regular file" -- timeout 60 env QT_QPA_PLATFORM=offscreen "$gui" --trace /dev/zero --screenshot "$work/z.png"
  mkfifo "$work/gui.fifo"
  expect 2 "gui.fifo: cannot read: not a regular file" -- timeout 60 env QT_QPA_PLATFORM=offscreen "$gui" --trace "$work/gui.fifo" --screenshot "$work/z.png"
  echo keep >"$work/gui-file"
  expect 2 "--export .*gui-file: exists and is not a folder" -- timeout 60 env QT_QPA_PLATFORM=offscreen "$gui" --export "$work/gui-file"
  expect 2 "--screenshot .*: is a folder" -- timeout 60 env QT_QPA_PLATFORM=offscreen "$gui" --screenshot "$work"
  ln -s "$work/gui-file" "$work/gui-link.png"
  expect 0 "" -- timeout 120 env QT_QPA_PLATFORM=offscreen "$gui" --screenshot "$work/gui-link.png"
  check "a screenshot replaces a symlink, not its target" bash -c "[ ! -L '$work/gui-link.png' ] && [ \"\$(cat '$work/gui-file')\" = keep ]"
fi
# Bash completion (scripts/parasim-completion.bash): subcommands and options from --help.
complete_words() {  # complete_words WORD...: what completing the last word offers
  bash -c 'source "$1/scripts/parasim-completion.bash"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _parasim; echo "${COMPREPLY[*]}"' \
    _ "$src" "$@"
}
check "completion offers the subcommands" test "$(complete_words "$parasim" si)" = "simulate"
check "completion offers a subcommand's options" test "$(complete_words "$parasim" plan --write-b)" = "--write-best"
check "completion offers the backends" test "$(complete_words "$parasim" run x.yaml --backend c)" = "cpu cuda"
# Every JSON document opens with its schema and the program's version and revision.
expect 0 '^\{
  "schema": "parasim\.check/1",
  "parasim": \{
    "version": "[0-9.]+",
    "revision": ' -- "$parasim" check --json "$q"
for cmd in "simulate --json $q" "topo --json $q" "plan --json --top 1 $q" "presets --json" "backends --json"; do
  kind=${cmd%% *}
  # shellcheck disable=SC2086
  expect 0 "\"schema\": \"parasim\.$kind/1\"" -- "$parasim" $cmd
done
expect 0 '"schema": "parasim\.sweep/1"' -- "$parasim" sweep "$q" --vary plan.dp=1,2 --json
# --json [FILE] on every command: bare, the JSON alone on standard output (before or after
# the scenario); with a FILE, the JSON there and the usual output too.
for cmd in "check" "simulate" "topo" "plan --top 1" "sweep --vary plan.dp=1,2"; do
  kind=${cmd%% *}
  # shellcheck disable=SC2086
  check "$kind --json before the scenario prints JSON alone" bash -c '"$@" | python3 -c "import json,sys; json.load(sys.stdin)"' _ "$parasim" $kind --json "$q" ${cmd#"$kind"}
  # shellcheck disable=SC2086
  expect 0 "^(scenario|planning|cluster|sweep|ok|  *)" -- "$parasim" $kind "$q" ${cmd#"$kind"} --json "$work/$kind.json"
  check "$kind --json FILE writes the $kind schema" grep -q "\"schema\": \"parasim.$kind/1\"" "$work/$kind.json"
done
expect 0 '^kind +name' -- "$parasim" presets --json="$work/p.out"
check "--json=FILE takes any name" grep -q '"schema": "parasim.presets/1"' "$work/p.out"
expect 2 "--csv - and --json both write to standard output" -- "$parasim" sweep "$q" --vary plan.dp=1,2 --csv - --json
expect 2 "--json: .*nope/x.json: the folder .*nope does not exist" -- "$parasim" simulate "$q" --json "$work/nope/x.json"
# export --megatron: the plan as Megatron-LM's arguments.
expect 0 "^--tensor-model-parallel-size 8 --pipeline-model-parallel-size 2 \\\\$" -- "$parasim" export --megatron "$src/scenarios/hybrid-32-gpus.yaml"
expect 0 "--moe-layer-freq '\(\[0\]\*3\+\[1\]\*58\)'" -- "$parasim" export --megatron "$src/scenarios/large/moe-deepseek-v3.yaml"
expect 0 "^--multi-latent-attention --kv-lora-rank 512 " -- "$parasim" export --megatron "$src/scenarios/large/moe-deepseek-v3.yaml"
expect 0 "# note: an uneven split \(61 layers over 16 stages\)" -- "$parasim" export --megatron "$src/scenarios/large/moe-deepseek-v3.yaml"
expect 2 "a generic layer list" -- "$parasim" export --megatron "$src/scenarios/cnn-lenet.yaml"
# import --megatron: export's arguments read back on the same cluster predict the same step.
step_of() { "$parasim" simulate --json "$@" | grep -m1 '"step_time"'; }
"$parasim" export --megatron "$src/scenarios/moe-mixtral-8x7b.yaml" >"$work/mixtral.args"
expect 0 "wrote .*mixtral.yaml: " -- "$parasim" import --megatron "$work/mixtral.args" --gpus 64 --cluster dgx-h100 --out "$work/mixtral.yaml"
check "an exported and imported plan predicts the same step" test "$(step_of "$src/scenarios/moe-mixtral-8x7b.yaml")" = "$(step_of "$work/mixtral.yaml")"
expect 0 "^  nodes: 2$" -- bash -c 'printf "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --vocab-size 256 --micro-batch-size 1 --global-batch-size 16 --save /x\n" | "$1" import --megatron -' _ "$parasim"
printf '%s\n' '--num-layers 2 \' '  --hidden-size big --num-attention-heads 4 --seq-length 64' >"$work/args.sh"
expect 2 "args.sh:2:3: --hidden-size: expected a whole number, got 'big'" -- "$parasim" import --megatron "$work/args.sh" --gpus 8
expect 2 "how many GPUs run it\? Give --gpus N" -- "$parasim" import --megatron "$work/mixtral.args"
# Exit codes that gate a script: 3 when the plan, or every plan, does not fit.
big="--set model=gpt-30b --set plan.dp=1"
expect 0 "does not fit in memory" -- "$parasim" check "$q" $big
# ... and the advice points to the planner (nothing fits on 2 CPU ranks) or to the best
# plan that fits on the devices (30B on one A100 with the hosts' memory: offloading).
expect 0 "no plan fits on these 2 devices; parasim plan .*quickstart.yaml --set model=gpt-30b --set plan.dp=1 finds" -- "$parasim" check "$q" $big
expect 0 "the best of the [0-9]+ plans that fit on these devices \(the quick tier's estimate .* a step; parasim plan ranks the best by the simulator\): parasim simulate .*memory-30b-one-gpu.yaml --set plan.dp=1 .*offload_optimizer=true" -- "$parasim" simulate "$src/scenarios/memory-30b-one-gpu.yaml"
# The levers named are the plan's own: one A100 has no tp to raise or dp to shard over.
expect 0 "does not fit in memory: raise pp \(now 1\), recompute more \(now none\), offload the optimizer to host memory \(parasim plan" -- "$parasim" check "$src/scenarios/memory-30b-one-gpu.yaml"
# A search the advice cannot afford (165,000 plans on 8,192 GPUs) is not run: the advice
# says so, and check answers in about a second.
start_ms=$(date +%s%3N)
expect 0 "the best plan that fits was not computed \(its search takes more than 1 s\): parasim plan .*llama3-70b-8xh100.yaml --set cluster.nodes=1024 .* searches every plan" -- "$parasim" check "$src/scenarios/llama3-70b-8xh100.yaml" --set cluster.nodes=1024 --set training.global_batch=16384 --set plan.tp=1 --set plan.pp=1 --set plan.dp=8192
check "check's advice is bounded (took $(($(date +%s%3N) - start_ms)) ms)" test $(($(date +%s%3N) - start_ms)) -lt 8000
expect 3 "does not fit in memory: stage 0 needs .* \(--require-fit\)" -- "$parasim" check "$q" $big --require-fit
expect 3 "does not fit in memory" -- "$parasim" check --json "$q" $big --require-fit
expect 0 "fits" -- "$parasim" check "$q" --require-fit
expect 3 "\(--require-fit\)" -- "$parasim" simulate "$q" $big --require-fit
expect 3 "no plan fits on the devices planned for \(--require-fit\)" -- "$parasim" plan "$q" --set model=gpt-30b --gpus 1 --top 1 --require-fit
# plan --write-best: the best plan as a scenario extending the one planned; it simulates to
# the step the plan's table shows first.
expect 0 "wrote $work/best.yaml: the best plan as a scenario" -- "$parasim" plan "$q" --top 1 --write-best "$work/best.yaml"
check "the best plan's scenario extends the one planned" grep -q "^extends: .*quickstart.yaml" "$work/best.yaml"
best_step=$("$parasim" plan "$q" --top 1 --json | grep -m1 '"step_time"' | sed 's/.*: \([0-9.e+-]*\).*/\1/')
written_step=$("$parasim" simulate "$work/best.yaml" --json | grep -m1 '"step_time"' | sed 's/.*: \([0-9.e+-]*\).*/\1/')
check "the best plan's scenario simulates to the plan's step ($best_step s)" test "$best_step" = "$written_step"
# The per-rank bubble is the time it stands for with its share of the step, not a
# fraction printed as a time; the NCCL protocols of the collectives are named.
expect 0 "^ +0 .* [0-9.]+ m?s \([0-9.]+ %\)$" -- "$parasim" simulate "$src/scenarios/pipeline-microbatches.yaml"
expect 0 "\"bubble_fraction\": 0\.[0-9]+" -- "$parasim" simulate "$src/scenarios/pipeline-microbatches.yaml" --json
expect 0 "NCCL protocols .*(LL|Simple)" -- "$parasim" simulate "$src/scenarios/refresh-a100.yaml"
expect 0 "^parasim [0-9]" -- "$parasim" --version
expect 0 "Summarise the cluster graph" -- "$parasim" topo --help
expect 2 "required|Subcommand" -- "$parasim"
expect 2 "" -- "$parasim" no-such-command
expect 2 "scenario is required|required" -- "$parasim" topo
expect 0 "bisection bandwidth: 5 GB/s" -- "$parasim" topo "$q"
expect 0 "ok: .*quickstart.yaml is a valid scenario and fits in memory" -- "$parasim" check "$q"
expect 0 "does not fit in memory" -- "$parasim" check "$q" --set cluster=dgx-h100 --set cluster.gpus_per_node=1 --set model=gpt-30b --set plan.dp=1 --set training.micro_batch=1
expect 0 "\"fits\": false" -- "$parasim" check --json "$q" --set cluster=dgx-h100 --set cluster.gpus_per_node=1 --set model=gpt-30b --set plan.dp=1 --set training.micro_batch=1
expect 0 "dp 4 x tp 2 x pp 1 = 8 devices" -- "$parasim" check "$q" --set cluster=dgx-h100 --set plan.dp=4 --set plan.tp=2
expect 0 "\"world\": 2" -- "$parasim" check --json "$q"
# Links carry their usable rate: 450 GB/s NVLink at 0.824, 50 GB/s NDR at 0.94.
expect 0 "\"bisection_bandwidth\": 1483200000000" -- "$parasim" topo --json "$q" --set cluster=dgx-h100 --set plan.dp=4
expect 0 "route 0 -> 9: 4 hops, bottleneck 47 GB/s" -- "$parasim" topo "$q" --set cluster=hgx-h100 --set cluster.nodes=4 --set plan.dp=4 --route 0 9
expect 0 "h100-sxm" -- "$parasim" presets
expect 0 "step time .*ms" -- "$parasim" simulate "$q"
expect 0 "bottleneck: compute-bound" -- "$parasim" simulate "$q"
expect 0 "\"step_time\": [0-9]" -- "$parasim" simulate --json "$q"
# NCCL's ring folds exactly; MPI's binomial all-reduce (libnbc) is no shift of itself, so
# the CPU quickstart simulates both ranks.
expect 0 "ranks simulated: 1 of 2 \(2 data-parallel replicas folded, exact\)" -- "$parasim" simulate "$q" --set cluster=dgx-h100
expect 0 "collectives: 1 x binomial \(setting auto\)" -- "$parasim" simulate "$q"
expect 0 "ranks simulated: all 2" -- "$parasim" simulate "$q" --set cluster=dgx-h100 --fold never
expect 2 "fold" -- "$parasim" simulate "$q" --fold sometimes
expect 0 "fp16 loss scaling  1 step in 501 skipped \(0\.20 %\)" -- "$parasim" simulate "$q" --set training.precision=fp16 --set training.loss_scale_window=500
expect 0 "\"skipped_fraction\": 0\.000999" -- "$parasim" simulate "$q" --set training.precision=fp16 --json
# A cluster with a straggler and a degraded link: the uniform cluster beside it, the slowest
# rank named, the structured bottleneck, a sweep over the throttling by the entry's index.
st="$src/scenarios/straggler-h100.yaml"
expect 0 "non-uniform cluster  step .* against .* with every device and link at its rate: .* lost" -- "$parasim" simulate "$st"
expect 0 "slowest rank 11: .* \(computes at 0.8x its speed\)" -- "$parasim" simulate "$st"
expect 0 "degraded link n1.nic0 \(4 links at 50 % of their bandwidth\)" -- "$parasim" simulate "$st"
expect 0 "bottleneck: .* waiting for a straggler: rank 11" -- "$parasim" simulate "$st"
expect 0 "\"slowest_rank\": 11" -- "$parasim" simulate "$st" --json
expect 0 "\"kind\": \"straggler\"" -- "$parasim" simulate "$st" --json
expect 0 "ranks simulated: all 16" -- "$parasim" simulate "$st" --fold always
expect 0 "^ +0.4 +16 " -- "$parasim" sweep "$st" --vary cluster.degraded.0.factor=1,0.4
expect 0 "ranks wait for the slowest of each synchronised op \(cluster.jitter\)" -- "$parasim" simulate "$st" --set "cluster.degraded=[]" --set "cluster.jitter={sigma: 0.3}"
expect 2 "cluster.degraded.5: index 5 is past the list's end" -- "$parasim" simulate "$st" --set cluster.degraded.5.factor=0.5
expect 2 "cluster.degraded\[1\].link: no link is named 'n1.nic9'.*did you mean 'n1.nic0'" -- "$parasim" check "$st" --set "cluster.degraded=[{rank: 1, factor: 0.5}, {link: n1.nic9, factor: 0.5}]"
# SyncBN: its exchange as a dimension, its cost against per-rank statistics; a model with
# BatchNorm runs for real with either.
bn="$src/scenarios/syncbn-resnet18.yaml"
expect 0 "SyncBN +step .* against .* with each rank's own statistics: .* \(\+[0-9.]+ %\), of which .* in its collectives" -- "$parasim" simulate "$bn"
expect 0 "^syncbn +[0-9.]+ us" -- "$parasim" simulate "$bn"
expect 0 "\"local_step_time\": 0\.03" -- "$parasim" simulate "$bn" --json
expect 2 "training.batch_norm: expected one of local, sync, got 'global'" -- "$parasim" check "$bn" --set training.batch_norm=global
expect 0 "does not fit|OUT OF MEMORY" -- "$parasim" simulate "$q" --set cluster=dgx-h100 --set cluster.gpus_per_node=1 --set model=gpt-30b --set plan.dp=1 --set training.micro_batch=1 --set training.global_batch=1
# A step past the simulator's op cap is refused at its key, at once (51,200 layers ran
# into bad_alloc past 4 GB).
expect 2 "model.layers=65536:.*model.layers: the simulated step has at least 100663296 ops \(65536 layers x 32 micro-batches per pipeline x tp 8" -- "$parasim" simulate "$src/scenarios/hybrid-32-gpus.yaml" --set model.layers=65536 --set training.global_batch=64
expect 2 "plan.tp: heads 4 are not divisible by tp 3" -- "$parasim" simulate "$q" --set cluster.gpus_per_node=4 --set plan.tp=3 --set plan.dp=1 --set training.global_batch=4
expect 2 "plan.dp: dp x tp x pp = 4 x 1 x 1 = 4 devices, but the cluster has 2" -- "$parasim" simulate "$q" --set plan.dp=4 --trace "$work/t.json"
check "no trace after a failed run" test ! -e "$work/t.json"
expect 0 "" -- "$parasim" simulate "$q" --trace "$work/t.json"
check "trace written" grep -q '"traceEvents"' "$work/t.json"
expect 0 "" -- "$parasim" simulate "$q" --trace "$work/t.json.gz"
check "a .gz trace is gzip" gzip -t "$work/t.json.gz"
check "a .gz trace holds the same events" cmp <(gunzip -c "$work/t.json.gz") "$work/t.json"
# Progress on stderr (forced on, as a terminal would have it): the step's ops, then the trace.
expect 0 "simulating the step +[0-9]+ % \(.* of .*\).*writing the trace" -- env PARASIM_PROGRESS=1 "$parasim" simulate "$src/scenarios/hybrid-32-gpus.yaml" --fold never --trace "$work/progress.json"
# Perfetto's protobuf format: protoc reads it with Perfetto's field numbers, a slice per span.
expect 0 "" -- "$parasim" simulate "$src/scenarios/pipeline-microbatches.yaml" --trace "$work/p.pftrace"
"$parasim" simulate "$src/scenarios/pipeline-microbatches.yaml" --trace "$work/p.json" >/dev/null
if command -v protoc >/dev/null; then
  protoc --proto_path="$src/tests/report" --decode=perfetto.protos.Trace "$src/tests/report/perfetto_subset.proto" <"$work/p.pftrace" >"$work/p.txt"
  check "protoc decodes the Perfetto trace" test -s "$work/p.txt"
  check "the Perfetto trace has no field Perfetto's schema lacks" bash -c '! grep -Eq "^ *[0-9]+: " "$1"' _ "$work/p.txt"
  check "a slice per span of the JSON trace" test "$(grep -c TYPE_SLICE_BEGIN "$work/p.txt")" = "$(grep -o '"ph":"X"' "$work/p.json" | wc -l)"
fi
expect 0 "\"name\": \"cpu\"" -- "$parasim" backends --json

# The executor (CPU backend): one rank in process, two ranks through mpirun started by
# parasim itself, validate's side-by-side table and files, refusals before any rank starts,
# and faults that end every rank.
# cluster down removes an emulated cluster's own state only: PARASIM_CLUSTER_DIR naming a
# folder that is none (a home folder) keeps every file in it, and the folder.
mkdir -p "$work/not-a-cluster"
echo precious >"$work/not-a-cluster/hosts"
echo mine >"$work/not-a-cluster/notes.txt"
expect 0 "no emulated cluster was up" -- env PARASIM_CLUSTER_DIR="$work/not-a-cluster" "$parasim" cluster down
# cluster up checks its rates before touching anything (1 bps took the working cluster
# down, then failed in tc), and up and down wait for each other (a machine-wide lock).
expect 2 "--rate 1bps: expected a rate from .* to .* \(what tc shapes on a veth\)" -- "$parasim" cluster up "$q" --rate 1bps
expect 2 "--max-rate 1Pbps: expected a rate from" -- "$parasim" cluster up "$q" --max-rate 1Pbps
expect 2 "--latency 5s: expected at most 1 s" -- "$parasim" cluster up "$q" --latency 5s
lockfile=/run/lock/parasim-cluster.lock
[ -d /run/lock ] || lockfile=/tmp/parasim-cluster.lock
if command -v flock >/dev/null; then
  flock "$lockfile" sleep 1.5 &
  sleep 0.3
  expect 0 "waiting for another parasim cluster up or down to finish" -- env PARASIM_CLUSTER_DIR="$work/not-a-cluster" "$parasim" cluster down
  wait
fi
check "cluster down leaves a folder that is no cluster's state" test -f "$work/not-a-cluster/hosts" -a -f "$work/not-a-cluster/notes.txt"
# A folder with the state's marker: its own files go, the user's stay, and so does the folder.
touch "$work/not-a-cluster/.parasim-cluster" "$work/not-a-cluster/agent"
expect 0 "state .*/agent" -- env PARASIM_CLUSTER_DIR="$work/not-a-cluster" "$parasim" cluster down
check "only the cluster's files went" test ! -e "$work/not-a-cluster/agent" -a -f "$work/not-a-cluster/notes.txt"
# Options out of range or empty are refused before anything runs.
expect 2 "--max-error: expected a number of percent, not NaN" -- "$parasim" validate "$q" --max-error nan
expect 2 "--out: expected a folder, not an empty name" -- "$parasim" validate "$q" --out ''
expect 2 "--ranks: Value 100000 not in range 1 to 1024" -- "$parasim" calibrate --ranks 100000
# plan.placement without tp once wrote past its list (a corrupted heap, exit 134).
expect 2 "plan.placement: expected tp, dp and pp" -- "$parasim" check "$q" --set plan.placement=dp,dp,pp

if "$parasim" backends 2>/dev/null | grep -Eq "^cpu +yes +yes"; then
  # A model with BatchNorm trains for real under SyncBN.
  expect 0 "loss " -- "$parasim" run "$q" --set model=lenet-bn --set training.batch_norm=sync --set run.steps=2 --set run.warmup=0
  one="--set plan.dp=1 --set training.global_batch=4"
  expect 0 "step time .* median" -- "$parasim" run "$q" $one --steps 2 --warmup 0
  expect 0 "loss +[0-9.]+ -> [0-9.]+" -- "$parasim" run "$q" --steps 2 --warmup 1 --json "$work/run.json" --trace "$work/run.trace.json"
  check "run JSON written" grep -q '"median_step_time"' "$work/run.json"
  check "measured trace written" grep -q '"traceEvents"' "$work/run.trace.json"
  expect 0 "prediction against measurement" -- "$parasim" validate "$q" --steps 2 --warmup 1 --out "$work/val"
  check "validate wrote both traces" test -s "$work/val/predicted.trace.json" -a -s "$work/val/measured.trace.json"
  check "validate wrote the comparison" grep -q '"metric": "step time"' "$work/val/comparison.json"
  check "the comparison's metrics have identifiers" grep -q '"id": "step_time"' "$work/val/comparison.json"
  check "the comparison says where and when it was measured" grep -Eq '"date": "20[0-9-]+T[0-9:]+Z"' "$work/val/comparison.json"
  check "the comparison carries its schema" grep -q '"schema": "parasim.comparison/2"' "$work/val/comparison.json"
  check "the comparison counts steps from 1" grep -q '"step": 1,' "$work/val/comparison.json"
  # --repeat: the median run compared, each figure's spread over the runs; --json alone on
  # standard output, the steps and tables on standard error.
  "$parasim" validate "$q" --steps 2 --warmup 0 --repeat 3 --out "$work/valr" --json >"$work/valr.out" 2>"$work/valr.err"
  check "validate --json prints the comparison alone" python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['runs'] == 3, d['runs']; r=d['comparison'][0]; assert r['measured_min'] <= r['measured'] <= r['measured_max']" "$work/valr.out"
  check "validate --repeat shows the spread" grep -Eq "^step time .* [0-9.]+ ms \.\. [0-9.]+ ms$" "$work/valr.err"
  check "validate --repeat says which run it compares" grep -q "median step of run [123], the median of 3 runs" "$work/valr.err"
  check "the comparison says how busy the host was" grep -q '"busy_before": ' "$work/valr.out"
  expect 2 "--repeat: Value 0 not in range" -- "$parasim" validate "$q" --repeat 0
  # A profile measured on another host: the comparison warns.
  sed 's/^# on [^ ]* (/# on elsewhere (/' "$src/scenarios/hardware/profiles/epyc-2core.yaml" >"$work/other-host.yaml"
  expect 0 "warning: the profile .*other-host.yaml was measured on elsewhere, this is " -- "$parasim" validate "$q" --steps 1 --warmup 0 --set hardware.profile="$work/other-host.yaml" --out "$work/valo"
  # --max-error: past it the comparison is still written, and the status says so.
  expect 4 "off the measured one, past --max-error 0 %" -- "$parasim" validate "$q" --steps 1 --warmup 0 --out "$work/val0" --max-error 0
  check "a validate past --max-error still writes its comparison" test -s "$work/val0/comparison.json"
  expect 0 "prediction against measurement" -- "$parasim" validate "$q" --steps 1 --warmup 0 --out "$work/val1" --max-error 100000
  # Launching: the user's mpirun arguments; inside a Slurm allocation, the srun to use.
  expect 0 "step time" -- "$parasim" run "$q" --steps 1 --warmup 0 --mpirun-args "--mca btl self,vader"
  # Stability: the gradient norm per step, clipping, divergence (warned, or stopped with
  # status 5) and an injected bad worker named by step and rank.
  expect 0 "step +1/2 .* loss [0-9.]+  \|g\| [0-9.]+ .*  clipped x0\.0" -- "$parasim" run "$q" --steps 2 --warmup 0 --set training.grad_clip=0.01
  expect 0 "lr 0\.0005" -- "$parasim" run "$q" --steps 2 --warmup 0 --set training.warmup_steps=2
  expect 5 "error: training diverged at step 2: the loss [0-9.]+ is [0-9.]+ times the median of the last 1 steps' .*\(run.on_divergence: stop\)" -- "$parasim" run "$q" --steps 3 --warmup 0 --set training.learning_rate=3 --set run.on_divergence=stop
  expect 0 "warning: training diverges: step 2: the gradient norm is nan \(non-finite on rank 1\)" -- "$parasim" run "$q" --steps 2 --warmup 0 --set "run.inject=[{step: 2, rank: 1, kind: nan}]"
  expect 0 "\"grad_norm\": [0-9]" -- "$parasim" run "$q" --steps 1 --warmup 0 --json
  expect 2 "run.inject changes a rank's gradients .* \(use zero 0 or 1\)" -- "$parasim" run "$q" --steps 1 --set plan.zero=2 --set "run.inject=[{step: 1, rank: 1, kind: zero}]"
  expect 2 "inside a Slurm allocation \(job 77\) the ranks are srun's to start: srun -n 2 " -- env SLURM_JOB_ID=77 "$parasim" run "$q" --steps 1
  expect 0 "dp 1 x tp 2 x pp 1 \(sequence parallel\)" -- "$parasim" run "$q" --set plan.dp=1 --set plan.tp=2 --set plan.sequence_parallel=true --steps 1 --warmup 0
  # Tensor-parallel communication overlap, run for real: the ring's blocks and pipelined sums.
  expect 0 "\(sequence parallel, tp comm overlap\)" -- "$parasim" validate "$q" --set plan.dp=1 --set plan.tp=2 --set plan.sequence_parallel=true --set plan.tp_comm_overlap=true --steps 2 --warmup 1 --out "$work/overlap"
  check "the overlap's measured trace has its ring transfers" grep -q 'tp ring #0 send' "$work/overlap/measured.trace.json"
  expect 2 "GELU MLP" -- "$parasim" run "$q" --set model.mlp=swiglu
  # fp16 with a loss scale far too large (the largest allowed, 2^32): the steps overflow,
  # are skipped and say so.
  expect 0 "loss scale +1\.07374e\+09 \(from 4\.29497e\+09; 2 steps skipped for overflow\)" -- "$parasim" run "$q" --set plan.dp=1 --set training.precision=fp16 --set training.loss_scale=4294967296 --steps 1 --warmup 1 --json "$work/fp16.json"
  check "run JSON has each step's loss scale" grep -q '"loss_scale": 1073741824' "$work/fp16.json"
  # A bad worker with finite gradients is named on its step's line, against its peers.
  expect 0 "step +3/6 .*rank 1's gradients [0-9.]+x its data-parallel peers'" -- "$parasim" run "$src/scenarios/bad-worker.yaml"
  expect 2 "training.loss_scale: expected a number from 1 to" -- "$parasim" simulate "$q" --set training.loss_scale=0.5
  # Generic (CNN) models run as GEMM equivalents, and every output says so.
  lenet="$src/scenarios/cnn-lenet.yaml"
  expect 0 "GEMM equivalents of lenet's 5 layers" -- "$parasim" run "$lenet" --backend cpu --set plan.dp=2 --steps 2 --warmup 0 --json "$work/lenet.json" --trace "$work/lenet.trace.json"
  check "run JSON names the equivalents" grep -q '"model": "GEMM equivalents of lenet' "$work/lenet.json"
  check "measured trace names the equivalents" grep -q '"model":"GEMM equivalents of lenet' "$work/lenet.trace.json"
  expect 0 "prediction against measurement" -- "$parasim" validate "$lenet" --backend cpu --set plan.dp=1 --set plan.pp=2 --steps 2 --warmup 0 --out "$work/val-lenet"
  check "comparison JSON names the equivalents" grep -q '"model": "GEMM equivalents of lenet' "$work/val-lenet/comparison.json"
  expect 2 "does not fit in memory: stage 0 needs .* of 4 GiB" -- "$parasim" run "$q" --set model=gpt3-13b
  # Without a usable GPU (CI) the CUDA backend refuses at once; on a GPU host it trains.
  if "$parasim" backends | grep -Eq '^cuda +yes +yes'; then
    expect 0 "loss +[0-9.]+ -> [0-9.]+" -- "$parasim" run "$q" --backend cuda --set plan.dp=1 --steps 1 --warmup 0
  else
    expect 2 "backend cuda cannot run here|CUDA executor" -- "$parasim" run "$q" --backend cuda
  fi
  expect 2 "the plan needs 2 ranks .*; the job has 3" -- tests_mpirun 3 "$parasim" run "$q" --steps 1
  start=$(date +%s)
  expect 1 "error: rank 1: injected fault at step 1" -- env PARASIM_FAULT=1:1:raise "$parasim" run "$q" --steps 3
  expect 1 "Process name: \[\[[0-9]+,1\],1\]|rank 1" -- env PARASIM_FAULT=1:1:exit "$parasim" run "$q" --steps 3
  check "failed runs ended within 30 s" test $(($(date +%s) - start)) -lt 30
  check "no rank left behind" test -z "$(pgrep -f "parasim run $q" || true)"
  # calibrate: two ranks measure, the profile is written whole and the simulator reads it.
  expect 0 "link .* \\+ .*s" -- "$parasim" calibrate --quick --ranks 2 --max-size 64KiB --out "$work/prof.yaml" --json "$work/prof.json"
  check "profile has measured links" grep -q "^  intra_node: {bandwidth: .* GB/s, latency: .* us}" "$work/prof.yaml"
  # Every measurement is listed; one whose rounds spread too far (a busy host) as a comment.
  check "profile lists every measurement" grep -Eq "^    (# )?- \[all-reduce, 2, 65536," "$work/prof.yaml"
  check "profile has collective curves" grep -q "^    - \[2, 65536, [0-9.]*\]" "$work/prof.yaml"
  check "calibration JSON written" grep -q '"busbw"' "$work/prof.json"
  check "calibration JSON has each measurement's spread" grep -q '"spread": ' "$work/prof.json"
  # Its progress, counted in measurements, drawn by rank 0 when the launcher's stderr is a
  # terminal (forced here: PARASIM_PROGRESS is passed to the ranks).
  expect 0 "calibrating +100 % \(([0-9]+) of \1\)" -- env PARASIM_PROGRESS=1 "$parasim" calibrate --quick --ranks 2 --max-size 4KiB --out "$work/prof2.yaml"
  check "calibrate reports the rounds' spread" grep -q "^spread between each measurement's 3 rounds: median" <("$parasim" calibrate --quick --ranks 1 --max-size 4KiB --out "$work/prof1.yaml")
  expect 0 "device profile +.*prof.yaml \\(measured\\)" -- "$parasim" simulate "$q" --set hardware.profile="$work/prof.yaml"
  expect 0 "profile: .*prof.yaml" -- "$parasim" validate "$q" --steps 2 --warmup 0 --set hardware.profile="$work/prof.yaml" --out "$work/val2"
  expect 2 "--max-size must be at least 1KiB" -- "$parasim" calibrate --max-size 12B --out "$work/none.yaml"
  # Refused before measuring, with or without a GPU: no backend here, or no GPU preset named.
  expect 2 "backend cuda cannot run here|CUDA executor|--device: name the GPU preset" -- "$parasim" calibrate --backend cuda --out "$work/none.yaml"
  expect 2 "--device: no device preset 'bogus' \(one of: .*h100-sxm" -- "$parasim" calibrate --backend cuda --device bogus --out "$work/none.yaml"
  check "no profile after a refused calibration" test ! -e "$work/none.yaml"
  sed 's/^device: cpu-core/device: h100-sxm/' "$work/prof.yaml" >"$work/other.yaml"
  expect 2 "other.yaml:[0-9]+:9: device: the profile was measured for device 'h100-sxm'" -- "$parasim" simulate "$q" --set hardware.profile="$work/other.yaml"
fi

# The planner: every valid plan of the quickstart's model on its 2 ranks (132, counted by
# hand in tests/planner/planner_test.cpp), the best re-simulated; JSON and CSV for scripts.
expect 0 "132 valid plans: 132 fit, 0 rejected" -- "$parasim" plan "$q"
expect 0 "^1 .* simulated " -- "$parasim" plan "$q" --top 3
expect 0 "best: parasim simulate .* --set plan.dp=" -- "$parasim" plan "$q"
expect 0 "\"valid_plans\": 132" -- "$parasim" plan "$q" --json
expect 0 "\"tier\": \"estimate\"" -- "$parasim" plan "$q" --json --top 30 --resimulate 2
expect 0 "on 4 devices" -- "$parasim" plan "$q" --gpus 4
expect 0 "best: .*--set cluster.nodes=2 " -- "$parasim" plan "$q" --gpus 4
expect 0 "" -- "$parasim" plan "$q" --csv "$work/plans.csv"
check "plan --csv writes every plan that fits, ranked" test "$(wc -l <"$work/plans.csv")" -eq 133
expect 2 "gpus" -- "$parasim" plan "$q" --gpus 0
expect 2 "top" -- "$parasim" plan "$q" --top -1
# 30B on one 80 GB GPU: only with the optimizer (and parameters) in host memory; with a
# host too small for that, nothing fits and the answer is the smallest cluster.
m30="$src/scenarios/memory-30b-one-gpu.yaml"
expect 0 "44 valid plans: 15 fit, 29 rejected" -- "$parasim" plan "$m30"
# The headroom: a plan leaves 5 % of the memory free unless told otherwise; at 1 % the plan
# keeping the parameters on the device (78.7 of 80 GiB) fits too.
expect 0 "every plan leaves at least 5 % of the device's 80 GiB free" -- "$parasim" plan "$m30"
expect 0 "44 valid plans: 16 fit, 28 rejected" -- "$parasim" plan "$m30" --headroom 1%
expect 0 "\(fits, 1.3 GiB left\)" -- "$parasim" check "$src/scenarios/offload-30b-one-gpu.yaml" --set plan.offload_params=false --headroom 0.01
expect 0 "past the 5 % headroom: 1.3 GiB left" -- "$parasim" check "$src/scenarios/offload-30b-one-gpu.yaml" --set plan.offload_params=false
expect 2 "cluster.device.headroom.*expected a fraction from 0 to 0.5" -- "$parasim" check "$m30" --headroom 60%
expect 2 "cluster.device.headroom" -- "$parasim" check "$m30" --headroom lots
expect 2 "cluster.device.headroom: expected a fraction such as 0.8 or 80%, non-negative; got '-5%'" -- "$parasim" check "$m30" --headroom -5%
expect 0 "^ 1 .* 0 \+off\(o,p\) " -- "$parasim" plan "$m30"
expect 0 "every plan that fits on 1 device offloads to host memory; without offloading, the smallest cluster where one fits has 8 devices" -- "$parasim" plan "$m30"
expect 0 "\"smallest_fitting_devices_without_offload\": 8" -- "$parasim" plan "$m30" --json
expect 0 "best: .*--set plan.offload_optimizer=true --set plan.offload_params=true" -- "$parasim" plan "$m30"
expect 0 "no plan fits in 80 GiB per device" -- "$parasim" plan "$m30" --set cluster.host.memory=64GB
expect 0 "the smallest cluster where one fits: 8 devices" -- "$parasim" plan "$m30" --set cluster.host.memory=64GB
expect 0 "\"smallest_fitting_devices\": 8" -- "$parasim" plan "$m30" --set cluster.host.memory=64GB --json
# Offloading in simulate and check; its keys' errors.
expect 0 "host memory per rank" -- "$parasim" simulate "$src/scenarios/offload-30b-one-gpu.yaml"
expect 0 "offload \(exposed\)" -- "$parasim" simulate "$src/scenarios/offload-30b-one-gpu.yaml"
expect 0 "optimizer and parameters offloaded to host memory" -- "$parasim" check "$src/scenarios/offload-30b-one-gpu.yaml"
expect 0 "host memory: stage 0 keeps 503 GiB of its 1 TiB share \(fits\)" -- "$parasim" check "$src/scenarios/offload-30b-one-gpu.yaml"
expect 0 "OUT OF HOST MEMORY" -- "$parasim" check "$src/scenarios/offload-30b-one-gpu.yaml" --set cluster.host.memory=256GB
expect 2 "plan.offload_params: offloading the parameters needs the optimizer offloaded too" -- "$parasim" check "$m30" --set plan.offload_params=true
expect 2 "plan.offload_optimizer: CPU ranks" -- "$parasim" check "$q" --set plan.offload_optimizer=true
expect 2 "plan.offload_activations: offloading activations needs a transformer trained without recompute" -- "$parasim" check "$src/scenarios/offload-30b-one-gpu.yaml" --set plan.offload_activations=true
expect 0 "activations offloaded to host memory" -- "$parasim" check "$src/scenarios/fsdp-llama3-8b.yaml" --set plan.offload_activations=true
expect 2 "plan.zero: offloading the optimizer with dp 8 needs ZeRO-2 or -3" -- "$parasim" check "$m30" --set cluster.gpus_per_node=8 --set plan.dp=8 --set plan.offload_optimizer=true
expect 2 "cluster.host.link_bandwidth: applies only to the nvswitch and nvlink-mesh fabrics" -- "$parasim" check "$m30" --set cluster=pcie-node --set cluster.gpus_per_node=1 --set cluster.host.link_bandwidth=10GB/s
expect 2 "add a cluster.host section" -- "$parasim" check "$m30" --set cluster=dgx-b200 --set cluster.gpus_per_node=1 --set plan.offload_optimizer=true
expect 2 "plan.schedule" -- "$parasim" plan "$q" --set plan.schedule=zigzag --csv "$work/bad.csv"
check "a failed plan writes no CSV" test ! -e "$work/bad.csv"
# Under mpirun the ranks split the candidates and rank 0 prints the one ranking, the same
# as a single process's, at 2 and 4 ranks.
if "$parasim" backends 2>/dev/null | grep -Eq "^cpu +yes +yes"; then
  h=$src/scenarios/hybrid-32-gpus.yaml
  "$parasim" plan "$h" --json --top 50 --resimulate 3 >"$work/plan1.json"
  for n in 2 4; do
    tests_mpirun "$n" "$parasim" plan "$h" --json --top 50 --resimulate 3 >"$work/plan$n.json" 2>"$work/plan$n.err"
    check "plan over $n MPI ranks gives the single process's ranking" cmp -s "$work/plan1.json" "$work/plan$n.json"
  done
fi

# Sweeps: a grid of overrides, throughput and efficiency against GPUs, an SVG plot.
expect 0 "^ +1 +1 .* 100.0 %" -- "$parasim" sweep "$q" --vary plan.dp=1,2,4
expect 0 "^ +4 +4 " -- "$parasim" sweep "$q" --vary plan.dp=1,2,4
expect 0 "\"efficiency\": " -- "$parasim" sweep "$q" --vary plan.dp=1,2 --json
# --csv - writes the CSV alone to standard output; a value with commas is swept with ';'.
check "sweep --csv - is CSV only" test "$("$parasim" sweep "$q" --vary plan.dp=1,2 --csv - | head -1)" = "plan.dp,gpus,step_time,tokens_per_s,ideal_tokens_per_s,efficiency,mfu,fits,error"
expect 0 '^"dp,tp,pp",2,' -- "$parasim" sweep "$q" --vary "plan.placement=tp,dp,pp;dp,tp,pp" --csv -
expect 0 "wrote .*scaling.svg" -- "$parasim" sweep "$q" --vary plan.dp=1,2,4 --plot "$work/scaling.svg" --csv "$work/sweep.csv"
check "the plot has a point per simulated row" test "$(grep -c "<circle" "$work/scaling.svg")" -eq 3
check "the CSV has a row per point" test "$(wc -l <"$work/sweep.csv")" -eq 4
expect 0 "not simulated: 4: .*plan.dp" -- "$parasim" sweep "$q" --vary plan.dp=1,4 --fixed-nodes --batch fixed
expect 2 "KEY=V1,V2" -- "$parasim" sweep "$q" --vary plan.dp
expect 2 "SVG" -- "$parasim" sweep "$q" --vary plan.dp=1,2 --plot "$work/x.png"
check "a refused sweep writes no plot" test ! -e "$work/x.png"
expect 2 "plan.tpp" -- "$parasim" sweep "$q" --vary plan.dp=1 --set plan.tpp=1

# Bad input: exit 2, file:line:col, key, reason.
printf 'cluster: cpu-host\nmodel: tiny-gpt\ntraining:\n  global_batch: 16\nplan:\n  dp: 2\n  tpp: 1\n' >"$work/typo.yaml"
expect 2 "typo.yaml:7:3: plan.tpp: unknown key 'tpp' in plan \(did you mean 'tp'\?\)" -- "$parasim" check "$work/typo.yaml"
expect 2 "no such file" -- "$parasim" topo "$work/missing.yaml"
expect 2 "--set plan.dp=x:1:9: plan.dp: expected a positive integer" -- "$parasim" check "$q" --set plan.dp=x
expect 2 "plan.dp: dp x tp x pp = 4 x 1 x 1 = 4 devices, but the cluster has 2" -- "$parasim" topo "$q" --set plan.dp=4
expect 2 "--route 0 7: the cluster has devices 0 to 1|--route 7" -- "$parasim" topo "$q" --route 0 7
printf 'cluster: [unclosed\n' >"$work/syntax.yaml"
expect 2 "syntax.yaml:2:1: YAML syntax error" -- "$parasim" check "$work/syntax.yaml"

# No partial output: a failing run leaves no file behind; a good one writes it whole.
expect 2 "" -- "$parasim" topo "$work/typo.yaml" --dot "$work/out.dot"
check "no dot file after a failed run" test ! -e "$work/out.dot"
expect 0 "" -- "$parasim" topo "$q" --dot "$work/out.dot"
check "dot file written" grep -q "^graph \"cpu-host\"" "$work/out.dot"
check "dot file complete" grep -q "^}" "$work/out.dot"
check "no temporary files left" test -z "$(find "$work" -name '.*')"
expect 2 "does not exist" -- "$parasim" topo "$q" --dot "$work/no/such/dir/out.dot"

# Output safety (docs/reliability.md): paths checked before any work, outputs written as
# a set, special files written in place, links replaced rather than followed, write errors
# on standard output reported.
expect 2 "empty" -- "$parasim" simulate "$q" --trace ''
expect 2 "does not exist" -- "$parasim" sweep "$q" --vary plan.dp=1,2 --csv "$work/set.csv" --plot "$work/nodir/p.svg"
check "a refused output set writes none of its files" test ! -e "$work/set.csv"
mkfifo "$work/fifo"
cat "$work/fifo" >"$work/fifo.out" &
expect 0 "" -- "$parasim" simulate "$q" --trace "$work/fifo"
wait
check "a FIFO output stays a FIFO" test -p "$work/fifo"
check "the FIFO carried the trace" grep -q traceEvents "$work/fifo.out"
echo precious >"$work/victim"
ln -s "$work/victim" "$work/link.json"
expect 0 "" -- "$parasim" simulate "$q" --trace "$work/link.json"
check "a symlinked output is replaced, its target untouched" grep -qx precious "$work/victim"
expect 1 "cannot write to standard output: No space left" -- bash -c "'$parasim' simulate '$q' >/dev/full"
# Past a file-size limit (ulimit -f, 1 KiB blocks): the write fails (EFBIG) rather than
# SIGXFSZ killing the command; exit 1 with the reason, no temporary or partial file left.
expect 1 "cannot write '.*big.json': File too large" -- bash -c "ulimit -f 1; '$parasim' simulate '$q' --json '$work/big.json' >/dev/null"
check "a file-size limit leaves no partial output" test ! -e "$work/big.json"
check "a file-size limit leaves no temporary" test -z "$(find "$work" -name '.big.json.*')"
check "no temporary files left by any of these" test -z "$(find "$work" -name '.*')"
# A signal mid-write: the CSV's temporary exists while the plot goes to a FIFO nobody
# reads yet (the open blocks); SIGTERM then must remove the temporary and write nothing.
mkfifo "$work/sig.svg"
"$parasim" sweep "$q" --vary plan.dp=1,2 --csv "$work/sig.csv" --plot "$work/sig.svg" >/dev/null 2>&1 &
writer=$!
for _ in $(seq 300); do
  [ -n "$(find "$work" -name '.sig.csv.*')" ] && break
  sleep 0.1
done
check "the CSV's temporary exists while the set is written" test -n "$(find "$work" -name '.sig.csv.*')"
kill -TERM "$writer"
wait "$writer"
check "SIGTERM mid-write ends the command by that signal" test $? -eq 143
check "a signal mid-write leaves no temporary" test -z "$(find "$work" -name '.sig.csv.*')"
check "a signal mid-write writes none of the set" test ! -e "$work/sig.csv"
# Arguments past their range, and a sweep over a key no scenario has.
expect 2 "unknown key 'tpp'" -- "$parasim" sweep "$q" --vary plan.tpp=1,2
expect 2 "not in range 1 to 1000000" -- "$parasim" run "$q" --steps 2147483647 --warmup 5
expect 2 "expected seconds from 0.1 to 86400, got 'nan'" -- "$parasim" run "$q" --stall-timeout nan
expect 2 "not in range 1 to 65536" -- "$parasim" plan "$q" --gpus 1000000000
if "$parasim" backends 2>/dev/null | grep -Eq "^cpu +yes +yes"; then
  expect 2 "at most 4GiB" -- "$parasim" calibrate --max-size 1TiB
  expect 2 "need .* together \(.*\), and this host has" -- "$parasim" run "$q" --set model.hidden=65536 --set cluster.device.memory=64TiB
  # Many small ranks: each takes its runtime (104 MiB measured) beside its tensors, so one
  # more rank than the host's available memory holds at that is refused before any starts.
  avail_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
  many=$((avail_kib / (104 * 1024) + 8))
  expect 2 "the plan's $many CPU ranks need .* of runtime each\), and this host has" -- "$parasim" run "$q" --set cluster.gpus_per_node=$many --set plan.dp=$many --set training.global_batch=$((4 * many))
fi
# The whole run (training.tokens / training.steps, job:): simulate's run block, the
# Monte Carlo against the closed form, plan's objectives and the smaller cluster they search.
expect 0 "^run \(1\.0M tokens, 1000 steps, 2 devices in 1 node\)" -- "$parasim" simulate "$q" --set training.steps=1000 --set job.power.busy=100W
expect 0 "monte carlo +200 runs: .* closed form inside" -- "$parasim" simulate "$q" --set training.steps=100000 --set job.failures.device_mtbf=2h --set job.power.busy=100W --runs 200
expect 0 '"goodput": 0\.[0-9]+' -- "$parasim" simulate "$q" --set training.steps=1000 --json
expect 2 "--runs plays the whole run's failures out: the scenario needs training.tokens or training.steps" -- "$parasim" simulate "$q" --runs 10
expect 2 "--objective time-to-train ranks by the whole run: the scenario needs training.tokens or training.steps" -- "$parasim" plan "$q" --objective time-to-train
expect 2 "--objective energy needs the device's power: cpu-core states no TDP; set job.power.busy" -- "$parasim" plan "$q" --set training.steps=10 --objective energy
expect 2 "not both" -- "$parasim" simulate "$q" --set training.steps=10 --set training.tokens=1M
expect 2 "job.checkpoint.mode: expected one of sync, async, got 'later'" -- "$parasim" simulate "$q" --set training.steps=10 --set job.checkpoint.mode=later
expect 0 "ranked by time-to-train over the whole run \(1000 steps" -- "$parasim" plan "$q" --set training.steps=1000 --objective time-to-train
expect 0 "smaller clusters, each with its best plan by cost" -- "$parasim" plan "$q" --set training.steps=1000 --set job.failures.device_mtbf=1h --objective cost
expect 0 "job.failures.device_mtbf .*time to train +goodput +interruptions" -- "$parasim" sweep "$q" --set training.steps=1000 --vary job.failures.device_mtbf=1h,100h
expect 0 "^job.checkpoint.interval,gpus,step_time,.*,time_to_train,goodput,interruptions,energy_mwh,device_hours$" -- "$parasim" sweep "$q" --set training.steps=1000 --vary job.checkpoint.interval=1min,auto --csv -
# Outputs and words: a *.gz output is gzip; simulate's JSON names the plan; plan's
# rejections carry identifiers; CSV columns are the JSON's names.
expect 0 "" -- "$parasim" simulate "$q" --json "$work/s.json.gz"
check "--json FILE.json.gz is gzip" bash -c 'gzip -dc "$1" | grep -q "\"schema\": \"parasim.simulate/1\""' _ "$work/s.json.gz"
expect 0 '"plan": \{' -- "$parasim" simulate "$q" --json
expect 0 '"id": "model_state_exceeds_memory"' -- "$parasim" plan "$q" --set model.hidden=8192 --json
expect 0 "^rank,dp,tp,pp,cp,ep,virtual_stages,schedule,micro_batch,recompute,zero,shard_group,offload_optimizer,offload_params,offload_activations,sequence_parallel,tp_comm_overlap,placement,step_time,tokens_per_s,mfu,memory,tier,estimated_step_time,bottleneck$" -- bash -c '"$1" plan "$2" --top 1 --csv "$3" >/dev/null && head -1 "$3"' _ "$parasim" "$q" "$work/p1.csv"
expect 2 "training.loss_scale: expected a number from 1 to 4294967296" -- "$parasim" check "$q" --set training.precision=fp16 --set training.loss_scale=1e30
expect 0 "^throughput +[0-9.]+ samples/s$" -- "$parasim" simulate "$src/scenarios/cnn-resnet18.yaml"
expect 0 "^idle \(no pipeline\) [0-9.]+ % of the step" -- "$parasim" simulate "$q"
expect 0 "^pipeline bubble +[0-9.]+ % of the step" -- "$parasim" simulate "$src/scenarios/hybrid-32-gpus.yaml"
expect 0 "^DOES NOT FIT: the figures below are for a step that cannot run" -- "$parasim" simulate "$src/scenarios/memory-30b-one-gpu.yaml" --set plan.offload_optimizer=false --set plan.offload_params=false
# diff: two predictions side by side.
expect 0 "^plan\.dp +2 +1$" -- "$parasim" diff "$q" --set plan.dp=1 --set training.global_batch=8
expect 0 "the step (grew|shrank) by .*; the largest part that moved" -- "$parasim" diff "$src/scenarios/refresh-a100.yaml" "$src/scenarios/refresh-h100.yaml"
expect 0 '"schema": "parasim\.diff/1"' -- "$parasim" diff "$q" --set plan.dp=1 --set training.global_batch=8 --json
expect 2 "diff compares two scenarios: give B, or --set overrides" -- "$parasim" diff "$q"
expect 2 "plan.tpp" -- "$parasim" diff "$q" --set plan.tpp=2
printf 'device: cpu-core\nmemory_bandwidth: nan GB/s\n' >"$work/nan-profile.yaml"
expect 2 "nan-profile.yaml:2:19: memory_bandwidth: .*not a finite number" -- "$parasim" check "$q" --set hardware.profile="$work/nan-profile.yaml"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
