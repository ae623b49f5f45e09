#!/usr/bin/env bash
# The emulated cluster for real (cli/emulated.hpp): `parasim cluster up` makes two nodes in
# network namespaces joined by a shaped link, idempotently; a run on it starts one rank in
# each namespace (the hostfile, the launch agent) and its gradients cross the link; `down`
# removes everything, also what a half-made cluster left. Exits 77 (skipped) where this
# machine cannot make network namespaces (not root, no iproute2, a kernel without them).
# Usage: emulated_cluster_test.sh PARASIM SOURCE_DIR
set -u
parasim=$1
src=$2
s=$src/scenarios/emulated-dp.yaml
export PARASIM_CLUSTER_DIR=${TMPDIR:-/tmp}/parasim-cluster-test-$$
pass=0
fail=0
check() {
  local what=$1
  shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $what"; fi
}
if ip netns list 2>/dev/null | grep -q '^psim-'; then
  echo "skipped: an emulated cluster is up on this machine (parasim cluster status); not touching it"
  exit 77
fi
out=$("$parasim" cluster up "$s" 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
  if grep -Eq "needs root|needs iproute2|cannot make network namespaces|kernel has no" <<<"$out"; then
    echo "skipped: $out"
    exit 77
  fi
  echo "FAILED: cluster up: $out"
  exit 1
fi
trap '"$parasim" cluster down >/dev/null 2>&1' EXIT
check "up names the nodes" grep -q "emulated cluster up: 2 nodes x 1 rank" <<<"$out"
check "two namespaces" test "$(ip netns list | grep -c '^psim-n')" -eq 2
check "node names resolve inside a node" bash -c "ip netns exec psim-n0 getent hosts n1 | grep -q 10.213.0.2"
check "the NIC is shaped" bash -c "ip netns exec psim-n0 tc qdisc show dev eth0 | grep -q 'rate 200Mbit'"
again=$("$parasim" cluster up "$s" 2>&1)
check "up again is a no-op" grep -q "emulated cluster already up" <<<"$again"
check "status" bash -c "\"$parasim\" cluster status --json | grep -q '\"nodes\": 2'"
# The launch agent runs a node's processes under its host name, on its own cores.
agent_out=$("$PARASIM_CLUSTER_DIR/agent" n1 hostname 2>&1)
check "the agent runs node n1 as host n1 ($agent_out)" grep -qx "n1" <<<"$agent_out"
if [ "$(nproc)" -ge 2 ]; then
  c0=$("$PARASIM_CLUSTER_DIR/agent" n0 'grep Cpus_allowed_list /proc/self/status' 2>&1)
  c1=$("$PARASIM_CLUSTER_DIR/agent" n1 'grep Cpus_allowed_list /proc/self/status' 2>&1)
  check "each node on cores of its own ($c0 / $c1)" test "$c0" != "$c1"
fi
# A run on it: one rank per namespace, the gradient all-reduce over the shaped link.
validate() { OPENBLAS_NUM_THREADS=1 timeout 300 "$parasim" validate "$s" --emulated --steps 3 --warmup 1 --out "$PARASIM_CLUSTER_DIR-out" 2>&1; }
run=$(validate)
if ! grep -q "prediction against measurement" <<<"$run"; then
  # Open MPI's start-up over the emulated links has failed once in a while (its daemons'
  # wire-up): what it said, then one more try.
  echo "validate --emulated failed once; its output:"
  tail -30 <<<"$run"
  run=$(validate)
fi
grep -q "prediction against measurement" <<<"$run" || tail -30 <<<"$run"
check "validate --emulated runs" grep -q "prediction against measurement" <<<"$run"
dp=$(grep -E "^dp communication" <<<"$run" | awk '{print $3, $4, $5, $6}')
check "the gradients cross the link: tens of milliseconds of dp communication ($dp)" bash -c "grep -Eq '^dp communication +[0-9.]+ ms +[0-9.]+ ms' <<<\"$run\""
rm -rf "$PARASIM_CLUSTER_DIR-out"
# calibrate between the nodes: the link, and the CPU a transfer takes from the ranks.
cal=$(OPENBLAS_NUM_THREADS=1 timeout 300 "$parasim" calibrate --emulated --quick --max-size 256KiB --out "$PARASIM_CLUSTER_DIR-profile.yaml" 2>&1)
check "calibrate --emulated writes the link between the nodes" grep -q "inter_node: {bandwidth" "$PARASIM_CLUSTER_DIR-profile.yaml"
check "and the network's CPU per byte" grep -Eq "^network_cpu: \{send: [0-9.e+-]+ ns, receive: [0-9.e+-]+ ns\}" "$PARASIM_CLUSTER_DIR-profile.yaml"
grep -q "^network_cpu" "$PARASIM_CLUSTER_DIR-profile.yaml" 2>/dev/null || tail -20 <<<"$cal"
rm -f "$PARASIM_CLUSTER_DIR-profile.yaml"
# Half-made: a namespace and a bridge left without state; down removes them.
"$parasim" cluster down >/dev/null 2>&1
ip netns add psim-n7 && ip link add psim-r5 type bridge
left=$("$parasim" cluster down 2>&1)
check "down after a crash removes what was left" grep -q "namespace psim-n7" <<<"$left"
check "nothing left" bash -c "! ip netns list | grep -q '^psim-' && ! ip -o link show | grep -q ': psim'"
check "run refuses without a cluster" bash -c "\"$parasim\" run \"$s\" --emulated 2>&1 | grep -q 'no emulated cluster is up'"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
