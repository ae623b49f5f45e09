#!/bin/sh
# mpirun for the tests: N ranks on however many cores there are, one BLAS thread each,
# allowed as root (CI containers run as root).
n=$1
shift
root=""
[ "$(id -u)" = 0 ] && root="--allow-run-as-root"
exec mpirun -np "$n" --oversubscribe $root --bind-to none -x OPENBLAS_NUM_THREADS=1 "$@"
