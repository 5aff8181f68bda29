#!/usr/bin/env python3
"""Which of vLLM's paths a run took, from vLLM's own counts (vllm-stats.json, written by adapter.py), and a
failure where a variant's path was not taken (adapter.PATHS): a path that silently never ran is not
counted as judged.

    paths_taken.py GOLDEN_STATS [RANDOM_STATS]

The committed goldens' run must take every path of its variant (exit 1 naming the count that is 0); the
random set's counts are printed beside them, not required (its cases change with the seed).
"""
import json
import sys

SHOWN = ("requests", "engines", "max_running", "several_running", "prompt_chunks_split", "two_group_engines",
         "prefix_cache_queries", "prefix_cache_hits", "preemptions", "recomputed_tokens", "spec_draft_tokens",
         "spec_accepted_tokens", "spec_rejected_tokens", "generated_tokens")


def main():
    runs = []
    for path in sys.argv[1:]:
        with open(path) as f:
            runs.append(json.load(f))
    golden = runs[0]
    print(f"vLLM's counts ({golden['variant']}): " + ", ".join(
        f"{k} {' / '.join(str(r[k]) for r in runs)}" for k in SHOWN) + " (goldens / random set)")
    missing = [k for k in golden["paths"] if golden[k] <= 0]
    if missing:
        for k in missing:
            print(f"FAILED: variant {golden['variant']}: vLLM's count {k} is 0 on the committed goldens: "
                  "the path this variant exists for was not taken", file=sys.stderr)
        sys.exit(1)
    print(f"paths taken ({golden['variant']}): " + ", ".join(f"{k} {golden[k]}" for k in golden["paths"]))


if __name__ == "__main__":
    main()
