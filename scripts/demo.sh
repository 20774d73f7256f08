#!/usr/bin/env bash
# The main job: real transfers between two processes on this host.
#
# 1. fi_pingpong --self: server and client as two processes, over the best provider
#    getinfo offers for each endpoint type (FI_EP_RDM: shm; FI_EP_MSG: tcp; FI_EP_DGRAM:
#    udp), every size of `-S all` (0 B to 1 MiB; datagrams up to the provider's
#    max_msg_size), with the integrity check on.
#    Set FI_PROVIDER to pick another provider (e.g. FI_PROVIDER=tcp).
# 2. The example vendor provider (examples/vendor-provider) built OUT OF TREE as a plugin
#    and loaded through FI_PROVIDER_PATH: a checksummed ping-pong between two processes.
#
#   scripts/demo.sh                 # both parts
#   scripts/demo.sh -n 5000 --max-size 4096   # arguments go to the plugin ping-pong
#
# Needs only a fresh checkout and a Rust toolchain.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo="${CARGO:-cargo}"

echo "== building fi_pingpong (release)"
"$cargo" build --release --quiet --manifest-path "$root/Cargo.toml" -p ofi-tools --bin fi_pingpong
pingpong="$root/target/release/fi_pingpong"
for ep in rdm msg dgram; do
    echo "== fi_pingpong --self -e $ep -c -S all (best provider for FI_EP_${ep^^})"
    "$pingpong" --self -e "$ep" -c -S all -I 1000
done

# The plugin is built with its own target directory, as a vendor's build would be:
# nothing of the ofi-rs workspace is involved except the ofi-core sources.
vendor_target="$root/target/vendor-plugin"
plugins="$vendor_target/demo-plugins"

echo "== building the unixdgram plugin out of tree (release)"
CARGO_TARGET_DIR="$vendor_target" "$cargo" build --release --quiet \
    --manifest-path "$root/examples/vendor-provider/Cargo.toml"

mkdir -p "$plugins"
cp "$vendor_target/release/libofi_prov_unixdgram.so" "$plugins/"
echo "== plugin: $plugins/libofi_prov_unixdgram.so"

echo "== ping-pong between two processes (FI_PROVIDER_PATH=$plugins)"
FI_PROVIDER_PATH="$plugins" "$cargo" run --release --quiet \
    --manifest-path "$root/Cargo.toml" -p ofi --example dgram_pingpong -- "$@"
