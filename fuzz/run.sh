#!/usr/bin/env bash
# Fuzz the compiled event scanner with libFuzzer under AddressSanitizer and UBSan, then the
# compiled tree walks (fuzz/fuzz_tree.c, checked against plain walks) for a third of that.
#
#   fuzz/run.sh SECONDS [WORKDIR]
#
# Builds fuzz/fuzz_scan.c with clang, replays every regression case in fuzz/regressions/
# (each a crash found once, kept so that it stays fixed), then fuzzes for SECONDS from seeds
# made of real events (fuzz/seeds.py). A crash is written to WORKDIR/crashes/ and fails the
# run (exit 1): copy it into fuzz/regressions/ once fixed. Needs clang (Debian: clang,
# libclang-rt-14-dev); exits 0 with a message, fuzzing nothing, where clang is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:?usage: fuzz/run.sh SECONDS [WORKDIR]}"
work="${2:-$(mktemp -d)}"
python="${PYTHON:-python3}"
cc="${CLANG:-clang}"
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz/run.sh: $cc not found: not fuzzing (install Debian's clang and libclang-rt-14-dev)"
    exit 0
fi
mkdir -p "$work/crashes" "$work/corpus"
"$cc" -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=all -Isrc/cscan src/cscan/scan.c fuzz/fuzz_scan.c -o "$work/fuzz_scan"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
if compgen -G "fuzz/regressions/*" >/dev/null; then
    "$work/fuzz_scan" -runs=1 fuzz/regressions/* 2>&1 | tail -n 2
fi
"$python" fuzz/seeds.py "$work/corpus"
"$work/fuzz_scan" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=1024 \
    -dict=fuzz/scan.dict -artifact_prefix="$work/crashes/" -print_final_stats=1 \
    "$work/corpus" 2>&1 | grep -E "^#[0-9]+ *DONE|^stat::(number_of_executed_units|peak_rss|new_units_added)|ERROR|SUMMARY|Test unit written" || true
# the vectors' own mappings (mmap, mremap, munmap: TV_BIG_BYTES) at the fuzzer's sizes, for a third
"$cc" -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -DTV_BIG_BYTES=1024 \
    -fno-sanitize-recover=all -Isrc/cscan src/cscan/scan.c fuzz/fuzz_scan.c -o "$work/fuzz_scan_mapped"
"$work/fuzz_scan_mapped" -max_total_time="$(( (seconds + 2) / 3 ))" -max_len=65536 -timeout=10 -rss_limit_mb=1024 \
    -dict=fuzz/scan.dict -artifact_prefix="$work/crashes/" -print_final_stats=1 \
    "$work/corpus" 2>&1 | grep -E "^#[0-9]+ *DONE|^stat::(number_of_executed_units|peak_rss|new_units_added)|ERROR|SUMMARY|Test unit written" || true
"$cc" -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=all -Isrc/ctree src/ctree/tree.c fuzz/fuzz_tree.c -o "$work/fuzz_tree"
mkdir -p "$work/tree_corpus"
"$work/fuzz_tree" -max_total_time="$(( (seconds + 2) / 3 ))" -max_len=4097 -timeout=10 -rss_limit_mb=1024 \
    -artifact_prefix="$work/crashes/" -print_final_stats=1 \
    "$work/tree_corpus" 2>&1 | grep -E "^#[0-9]+ *DONE|^stat::(number_of_executed_units|peak_rss|new_units_added)|ERROR|SUMMARY|Test unit written" || true
if compgen -G "$work/crashes/*" >/dev/null; then
    echo "fuzz/run.sh: crashes in $work/crashes:"; ls "$work/crashes"
    exit 1
fi
echo "fuzz/run.sh: no crash in ${seconds} s"
