#!/usr/bin/env bash
# Build libfabric.so.1 (the C ABI of libfabric 1.17 over ofi-rs) — see docs/CAPI.md.
#
#   scripts/build-capi.sh [--release] [--link-only] [--profile-dir DIR] [--out DIR]
#
# Builds the `ofi-capi` static library with cargo (unless --link-only: the tests link
# what `cargo test -p ofi-capi` already built, found in --profile-dir, by default
# target/<profile>), then links it into
#   DIR/libfabric.so.1.17.0   SONAME libfabric.so.1, symbol versions of libfabric.map
#   DIR/libfabric.so.1 -> libfabric.so.1.17.0   (what programs load)
#   DIR/libfabric.so   -> libfabric.so.1        (what `cc ... -lfabric` links)
#   DIR/libfabric.pc   pkg-config file (headers: the installed libfabric-dev ones)
# The output DIR defaults to <profile dir>/capi. Prints DIR on its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
profile=debug
cargo_flags=()
link_only=0
out=""
profile_dir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --release) profile=release; cargo_flags+=(--release) ;;
        --link-only) link_only=1 ;;
        --out) out="$2"; shift ;;
        --profile-dir) profile_dir="$2"; shift ;;
        *) echo "build-capi.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
target_dir="${CARGO_TARGET_DIR:-$root/target}"
profile_dir="${profile_dir:-$target_dir/$profile}"
out="${out:-$profile_dir/capi}"
if [ "$link_only" = 0 ]; then
    (cd "$root" && cargo build -p ofi-capi "${cargo_flags[@]}" >&2)
fi
archive="$profile_dir/libofi_capi.a"
if [ "$link_only" = 1 ]; then
    # `cargo test` leaves the archive it built in deps/ without copying it up to the
    # profile directory (only `cargo build` does): take the newest of them, which is the
    # one this test run built.
    newest="$(ls -t "$profile_dir"/libofi_capi.a "$profile_dir"/deps/libofi_capi-*.a 2>/dev/null | head -n 1 || true)"
    archive="${newest:-$archive}"
fi
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
# The headers are the system's libfabric 1.17 ones (libfabric-dev); nothing is copied.
cat > "$out/libfabric.pc" <<PC
prefix=$out
libdir=\${prefix}
includedir=/usr/include

Name: libfabric
Description: The libfabric 1.17 C ABI over ofi-rs (headers from libfabric-dev)
URL: https://github.com/ofiwg/libfabric
Version: 1.17.0
Libs: -L\${libdir} -lfabric
Cflags: -I\${includedir}
PC
echo "$out"
