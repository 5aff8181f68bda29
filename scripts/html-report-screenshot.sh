#!/usr/bin/env bash
# Regenerates docs/img/html-report.png, the HTML report docs/fleet.md shows: the page of
# `ringkv report merge --html` over two shards of a run of the reference and one failing engine (the
# mutant plugin int8_static_clamp_128, which fails 3 golden cases), taken by headless chromium
# (scripts/install-engines.sh installs it) at 1280 x 1440 pixels.
# usage: scripts/html-report-screenshot.sh [BUILD_DIR]   (default: build-ci; ringkv and the plugin built:
#   cmake --build --preset ci --target ringkv ringkv_plugin_mutant_int8_static_clamp_128)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build-ci}" && pwd)"
RINGKV="$BUILD/cli/ringkv"
PLUGIN="$BUILD/abi/libringkv_plugin_mutant_int8_static_clamp_128.so"
OUT="$ROOT/docs/img/html-report.png"
for f in "$RINGKV" "$PLUGIN"; do
  if [ ! -e "$f" ]; then
    echo "$f is not built: cmake --build $BUILD --target ringkv ringkv_plugin_mutant_int8_static_clamp_128" >&2
    exit 2
  fi
done
CHROMIUM="${RINGKV_CHROMIUM:-$(command -v chromium || true)}"
if [ -z "$CHROMIUM" ]; then echo "chromium not found: scripts/install-engines.sh installs it" >&2; exit 2; fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
# Relative names, so that the page reads as a user's would: --engine ./lib....so --golden golden.
cp "$PLUGIN" .
ln -s "$ROOT/golden" golden
ENGINE="./$(basename "$PLUGIN")"
for i in 1 2; do
  rc=0
  "$RINGKV" check --quiet --golden golden --engine reference --engine "$ENGINE" --shard "$i/2" --json "shard-$i.json" \
    >/dev/null || rc=$?
  if [ "$rc" -gt 1 ]; then echo "ringkv check --shard $i/2 exited $rc" >&2; exit 2; fi
done
rc=0
"$RINGKV" report merge shard-1.json shard-2.json --html report.html >/dev/null 2>&1 || rc=$?
if [ "$rc" -ne 1 ]; then echo "ringkv report merge exited $rc, expected 1 (the mutant fails)" >&2; exit 2; fi
# A fresh profile, every host name resolving to nothing (the page fetches nothing), no sandbox (as root).
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$WORK/profile" \
  --host-resolver-rules="MAP * ~NOTFOUND" --no-first-run --hide-scrollbars --window-size=1280,1440 \
  --screenshot="$WORK/page.png" "file://$WORK/report.html" 2>"$WORK/chromium.log" \
  || { tail -20 "$WORK/chromium.log" >&2; exit 2; }
mv "$WORK/page.png" "$OUT"
echo "wrote $OUT ($(stat -c %s "$OUT") bytes)"
