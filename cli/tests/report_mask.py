"""The JSON report of `ringkv check` with its timings masked: the only fields that may differ between two
runs of the same work (a property's seconds to its first failing case and shrinking, the times its
report prints, and a scale case's time). Shared by the sharding and fleet tests."""
import json
import re

TIMES = re.compile(r"(found after|candidates tried,|tried,|query rows \([0-9.]+ %\),) [0-9]+\.[0-9]+ s")


def masked_text(text):
    return TIMES.sub(r"\1 <time> s", text)


def masked(path):
    with open(path) as f:
        report = json.load(f)
    for c in report.get("cases", []):  # a scale case's detail says how long it took
        c["detail"] = masked_text(c["detail"])
    for p in report.get("properties", []):
        if "shrink" in p:
            p["shrink"]["seconds_to_first"] = p["shrink"]["seconds_shrinking"] = "<time>"
        p["report"] = masked_text(p["report"])
    return report
