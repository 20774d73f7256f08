#!/bin/sh
# Debian's C fi_pingpong (libfabric-bin), unmodified, over ofi-rs's libfabric.so.1
# (built by scripts/build-capi.sh --release into target/release/capi). Takes the same
# options; scripts/compare.py runs it as one of "ours":
#   python3 scripts/compare.py --ours capi=scripts/fi_pingpong-over-ofi.sh ...
root="$(cd "$(dirname "$0")/.." && pwd)"
LD_LIBRARY_PATH="$root/target/release/capi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    exec "${FI_PINGPONG_C:-/usr/bin/fi_pingpong}" "$@"
