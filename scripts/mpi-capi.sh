#!/usr/bin/env bash
# Open MPI 4.1 (Debian openmpi-bin, libopenmpi-dev) over libfabric.so.1 of ofi-rs: its
# ofi MTL (`--mca pml cm --mca mtl ofi`) runs scripts/mpi/ring.c — point-to-point
# (a ring, a 1 MiB nonblocking exchange) and collectives — on 2 and 4 ranks of this
# host, for each provider given (default: "tcp;ofi_rxm" and "udp;ofi_rxd").
#
#   scripts/mpi-capi.sh [--c-library] [provider ...]
#
# --c-library runs the same against the system's libfabric, for comparison. Needs
# `apt-get install openmpi-bin libopenmpi-dev`; builds libfabric.so.1 in release mode
# first (scripts/build-capi.sh). Runs as root need --allow-run-as-root (added when
# root). Every run is bounded by `timeout`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
use_c=0
if [ "${1:-}" = "--c-library" ]; then use_c=1; shift; fi
provs=("$@")
[ ${#provs[@]} -gt 0 ] || provs=("tcp;ofi_rxm" "udp;ofi_rxd")
command -v mpicc >/dev/null || { echo "mpi-capi.sh: mpicc not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/ring" "$root/scripts/mpi/ring.c"

lib_env=()
if [ "$use_c" = 0 ]; then
    libdir="$("$root/scripts/build-capi.sh" --release | tail -1)"
    lib_env=(-x "LD_LIBRARY_PATH=$libdir")
    echo "library: $libdir/libfabric.so.1 (ofi-rs)"
else
    echo "library: the system's libfabric.so.1"
fi
as_root=()
[ "$(id -u)" = 0 ] && as_root=(--allow-run-as-root)

status=0
for prov in "${provs[@]}"; do
    for np in 2 4; do
        echo "== $prov, $np ranks"
        if ! timeout 300 mpirun "${as_root[@]}" --oversubscribe -np "$np" \
            --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$prov" \
            --mca btl self \
            -x FI_TCP_IFACE=lo -x FI_UDP_IFACE=lo "${lib_env[@]}" \
            "$work/ring"; then
            echo "FAILED: $prov, $np ranks" >&2
            status=1
        fi
    done
done
exit $status
