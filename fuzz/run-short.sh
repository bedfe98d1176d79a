#!/bin/sh
# Builds every fuzz target and runs each for a short while (default 20 s) with --sanitizer none,
# which works on the stable toolchain. CI calls this; a finding fails the script, and the
# crashing input is left under fuzz/artifacts/<target>/.
#
#   fuzz/run-short.sh [seconds]
set -eu
cd "$(dirname "$0")"
secs="${1:-20}"
targets="path reference challenge manifest template"
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
cargo fuzz build --sanitizer none
for t in $targets; do
    mkdir -p "corpus/$t"
    echo "== fuzz target $t for ${secs}s"
    cargo fuzz run --sanitizer none "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$secs" -max_len=65536 -print_final_stats=1
done
