#!/usr/bin/env bash
# Builds the native modules (analyze's scanner, decode's renderer) with AddressSanitizer and UBSan
# and feeds them random, damaged entries, comparing every answer with the regular builds (which
# the test suite holds to the protobuf decoder). Usage: scripts/fuzz_native.sh [ENTRIES] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
include=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
for source in pulsar_txn_cli/pipeline/_scan.c pulsar_txn_cli/codec/_render.c; do
  gcc -Wall -Wextra -Werror -Wno-unused-parameter -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
      -fno-omit-frame-pointer -shared -fPIC -I"$include" "$source" -o "$out/$(basename "$source" .c).so"
done
ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
    "$PY" scripts/fuzz_native.py "$out" "${1:-30000}" "${2:-1}"
