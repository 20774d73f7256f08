#!/usr/bin/env bash
# Build libfabric.so.1 (the C ABI of libfabric 1.17 over ofi-rs) — see docs/CAPI.md.
#
#   scripts/build-capi.sh [--release] [--link-only] [--out DIR]
#
# Builds the `ofi-capi` static library with cargo (unless --link-only: the tests link
# what `cargo test -p ofi-capi` already built), then links it into
#   DIR/libfabric.so.1.17.0   SONAME libfabric.so.1, symbol versions of libfabric.map
#   DIR/libfabric.so.1 -> libfabric.so.1.17.0   (what programs load)
#   DIR/libfabric.so   -> libfabric.so.1        (what `cc ... -lfabric` links)
# DIR defaults to target/<profile>/capi. Prints DIR on its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
profile=debug
cargo_flags=()
link_only=0
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --release) profile=release; cargo_flags+=(--release) ;;
        --link-only) link_only=1 ;;
        --out) out="$2"; shift ;;
        *) echo "build-capi.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
target_dir="${CARGO_TARGET_DIR:-$root/target}"
out="${out:-$target_dir/$profile/capi}"
if [ "$link_only" = 0 ]; then
    (cd "$root" && cargo build -p ofi-capi "${cargo_flags[@]}" >&2)
fi
archive="$target_dir/$profile/libofi_capi.a"
[ -f "$archive" ] || { echo "build-capi.sh: $archive not found (build ofi-capi first)" >&2; exit 1; }
mkdir -p "$out"
tmp="$out/.libfabric.so.1.17.0.$$"
# --whole-archive: every exported function is kept; the version script hides the rest.
${CC:-cc} -shared -o "$tmp" \
    -Wl,--whole-archive "$archive" -Wl,--no-whole-archive \
    -Wl,-soname,libfabric.so.1 \
    -Wl,--version-script="$root/crates/capi/libfabric.map" \
    -Wl,--gc-sections -Wl,-z,now -Wl,-z,relro \
    -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
mv -f "$tmp" "$out/libfabric.so.1.17.0"
ln -sfn libfabric.so.1.17.0 "$out/libfabric.so.1"
ln -sfn libfabric.so.1 "$out/libfabric.so"
echo "$out"
