#!/usr/bin/env bash
# Fuzzes the HTTP1 request parser with libFuzzer + AddressSanitizer for SECONDS (default 60).
# Not part of `swift test`. Usage: scripts/http-fuzz.sh [SECONDS]
# Prints libFuzzer's final stats; crashing inputs are left in .build-http/fuzz/http-parser/ as crash-*.
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$root/.build-http/fuzz/http-parser"  # ignored by .gitignore (.build-*/)
mkdir -p "$work/corpus"
cp -n "$root"/Fuzz/HTTPParserFuzz/corpus/* "$work/corpus/" 2>/dev/null || true

echo "building fuzzer..."
rm -f "$work/http-parser-fuzz"
swiftc -sanitize=fuzzer,address -parse-as-library -O -g -module-name HTTPParserFuzz \
    "$root"/Sources/HTTP1/*.swift "$root"/Fuzz/HTTPParserFuzz/main.swift \
    -o "$work/http-parser-fuzz" 2>&1 | grep -v "Cannot export local symbol" || true

[ -x "$work/http-parser-fuzz" ] || { echo "fuzzer build failed"; exit 1; }
echo "fuzzing for ${seconds}s..."
cd "$work"
set +e
./http-parser-fuzz -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$work/" corpus 2>&1 | tee "$work/last-run.log" | grep -E "^(#[0-9]+.*(DONE|INITED)|stat::|==[0-9]+==ERROR|SUMMARY|Fatal error|Test unit written)"
status=${PIPESTATUS[0]}
set -e
crashes=$(find "$work" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \) | wc -l)
echo "exit status: $status; crash/leak/timeout artifacts: $crashes"
exit "$status"
