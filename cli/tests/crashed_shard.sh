#!/usr/bin/env bash
# A property shard's own process (--jobs N > 1 runs each property as `ringkv check --property-shard`)
# that dies, here of SIGKILL as the kernel's OOM killer would kill it, is an error of that property on
# that engine, naming the signal and how to run it alone; the other properties are still run and
# reported, and the exit code says an engine verdict failed (1), not unusable input (2).
#   crashed_shard.sh RINGKV WORK
set -u
RINGKV=$(realpath "$1")
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1

# 2000 cases: each property runs for some seconds (OracleEquality is found and killed in its first).
"$RINGKV" check --engine reference --properties --no-golden --jobs 2 --cases 2000 \
  --filter '^(OracleEquality|GqaEqualsMha)$' --json report.json > out.txt 2> err.txt &
parent=$!
shard=""
for _ in $(seq 1 600); do
  shard=$(pgrep -P "$parent" -f -- '--property-shard=OracleEquality' | head -1)
  [ -n "$shard" ] && break
  sleep 0.1
done
if [ -z "$shard" ]; then
  kill "$parent" 2> /dev/null
  echo "FAIL: no --property-shard=OracleEquality process of ringkv ($parent) appeared within 60 s"
  cat err.txt
  exit 1
fi
sleep 0.5
kill -KILL "$shard"
wait "$parent"
rc=$?
fail=0
expect() {  # expect FILE REGEX WHAT
  if ! grep -Eq -- "$2" "$1"; then
    echo "FAIL: $3: /$2/ not in $1"
    fail=1
  fi
}
[ "$rc" -eq 1 ] || { echo "FAIL: exit code $rc, expected 1 (a property failed on the engine)"; fail=1; }
expect out.txt 'property OracleEquality +FAILED on engine reference' "the table names the property"
expect out.txt 'its process \(ringkv check --property-shard\) died of signal 9 \(Killed\)' "the report names the signal"
expect out.txt "run it alone with --jobs 1 --filter '\\^OracleEquality\\$'" "the report says how to run it alone"
expect report.json '"report": "  its process \(ringkv check --property-shard\) died of signal 9' "the JSON report holds it"
# The other property ran in its own shard and passed.
python3 - report.json << 'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
props = {p["name"]: p for p in r.get("properties", [])}
gqa = props.get("GqaEqualsMha")
if gqa is None or not gqa.get("passed"):
    print("FAIL: GqaEqualsMha did not pass beside the killed shard:", gqa)
    sys.exit(1)
PY
if [ "$fail" -ne 0 ]; then
  echo "---- stdout"; cat out.txt; echo "---- stderr"; tail -20 err.txt; echo "---- json"; head -c 3000 report.json
  exit 1
fi
echo "PASS: the killed shard is OracleEquality's error (signal 9); GqaEqualsMha passed; exit code 1"
