#!/usr/bin/env bash
# Builds analyze's native scanner with AddressSanitizer and UBSan and feeds it random, damaged
# entries, comparing every answer with the regular build (which the test suite holds to the
# protobuf decoder). Usage: scripts/fuzz_scan.sh [ENTRIES] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
include=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
gcc -Wall -Wextra -Werror -Wno-unused-parameter -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
    -fno-omit-frame-pointer -shared -fPIC -I"$include" pulsar_txn_cli/pipeline/_scan.c -o "$out/_scan.so"
ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
    "$PY" scripts/fuzz_scan.py "$out/_scan.so" "${1:-30000}" "${2:-1}"
