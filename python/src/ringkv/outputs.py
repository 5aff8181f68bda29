"""Writing what `ringkv check --outputs DIR` reads: one outputs file per case (golden-format §7) and
the engine's capabilities.json (§10)."""
import json
import os

import numpy as np
from safetensors.numpy import save_file

from .errors import EngineError

# The tensors an outputs file may hold (golden-format §7), with their dtype.
TENSORS = {"out": np.float32, "q_rot": np.float32, "k_rot": np.float32, "k_stored": np.float32,
           "v_stored": np.float32, "k_codes": np.int8, "v_codes": np.int8, "k_scales": np.float32,
           "v_scales": np.float32}


def write_outputs(path, case, engine_name, profile=None, tensors=None, unsupported=None, refused_steps=None):
    """Writes the outputs file of `case` to `path`.

    tensors: {name: array} of TENSORS, the layout of the case's rows ("out" [L][R][Hq][D] f32 required);
    profile: the precision profile (golden-format §5) the engine declares, or None for ringkv's default;
    unsupported: the reason the engine cannot run the case (then no tensor is written);
    refused_steps: the steps the engine refused (format 2: a refused rollback), any order."""
    meta = {"format": "ringkv-golden-outputs", "name": case.name, "id": case.id, "engine": engine_name}
    if unsupported is not None:
        if not str(unsupported):
            raise EngineError(f"{engine_name}: case {case.name}: an empty 'unsupported' reason")
        meta["unsupported"] = str(unsupported)
        tensors = {}
    else:
        tensors = dict(tensors or {})
        if "out" not in tensors:
            raise EngineError(f"{engine_name}: case {case.name}: no 'out' tensor")
        for name in tensors:
            if name not in TENSORS:
                raise EngineError(f"{engine_name}: case {case.name}: tensor {name!r} is not one an outputs file holds "
                                  f"(golden-format §7: {', '.join(TENSORS)})")
            tensors[name] = np.ascontiguousarray(tensors[name], dtype=TENSORS[name])
        if profile is not None:
            meta["profile"] = json.dumps(profile, sort_keys=True)
        if refused_steps:
            meta["refused_steps"] = json.dumps(sorted(int(s) for s in refused_steps))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    save_file(tensors, path, metadata=meta)


def write_capabilities(out_dir, name, capabilities):
    """Writes OUT_DIR/capabilities.json (golden-format §10) for an engine called `name` with the
    capabilities object `capabilities` (the fields of §10, without "format"/"name"). Returns its path."""
    caps = {"format": "ringkv-capabilities", "name": name}
    caps.update(capabilities or {})
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "capabilities.json")
    with open(path, "w") as f:
        json.dump(caps, f, indent=1, sort_keys=True)
        f.write("\n")
    return path
