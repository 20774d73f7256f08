#!/usr/bin/env bash
# Demo: build the example vendor provider (examples/vendor-provider) OUT OF TREE as a
# plugin, then run a ping-pong between two processes over it, loading the plugin through
# FI_PROVIDER_PATH. Needs only a fresh checkout and a Rust toolchain.
#
#   scripts/demo.sh                 # 1000 round trips, sizes 1..=65536 bytes
#   scripts/demo.sh -n 5000 --max-size 4096
#
# Arguments are passed to the example (crates/ofi/examples/dgram_pingpong.rs).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo="${CARGO:-cargo}"
# The plugin is built with its own target directory, as a vendor's build would be:
# nothing of the ofi-rs workspace is involved except the ofi-core sources.
vendor_target="$root/target/vendor-plugin"
plugins="$vendor_target/demo-plugins"

echo "== building the unixdgram plugin out of tree (release)"
CARGO_TARGET_DIR="$vendor_target" "$cargo" build --release \
    --manifest-path "$root/examples/vendor-provider/Cargo.toml"

mkdir -p "$plugins"
cp "$vendor_target/release/libofi_prov_unixdgram.so" "$plugins/"
echo "== plugin: $plugins/libofi_prov_unixdgram.so"

echo "== ping-pong between two processes (FI_PROVIDER_PATH=$plugins)"
FI_PROVIDER_PATH="$plugins" "$cargo" run --release --quiet \
    --manifest-path "$root/Cargo.toml" -p ofi --example dgram_pingpong -- "$@"
