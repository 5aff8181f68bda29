"""The model vLLM serves for ringkv (engines/vllm/adapter.py): an out-of-tree model class, registered
with vLLM's ModelRegistry as model plugins register theirs, built from vLLM's own layers.

    RingkvForCausalLM  (config.json: architectures ["RingkvForCausalLM"], the shape in "ringkv")

Per layer l: vLLM's `Attention` (its CPU backend CPU_ATTN here; the window `per_layer_sliding_window`,
the softmax scale, `logits_soft_cap`, learned `sinks`) and vLLM's rotary embedding from `get_rope`
(neox or gptj, partial rotary, linear scaling; no rotary on a layer whose RoPE is "none", as vLLM's NoPE
layers do). A token is its id at its position, both vLLM's own (input_ids and position ids): the table
`node_of` [vocab][max_pos] names the case token (a "node") each (id, position) stands for, and a token's
q, k and v at every layer come from the node's row of `qkv` [nodes][L][(Hq + 2 Hkv) D] (the case's raw
values, filled by the adapter before each run, as weights are loaded), so each token's attention inputs
are exactly the case's; vLLM's rotary embedding rotates q and k from vLLM's own position ids. An (id,
position) that stands for no case token (node 0: a draft token the ngram proposer guessed wrong) gets
junk inputs (k 0, v JUNK_V): a rejected draft whose key stayed visible after vLLM's rollback changes the
output of every later query that attends it. The attention layers are independent, as ringkv's are:
layer l's inputs are the table's, never layer l-1's output.

Logits: the hidden state a forward returns carries the node (base-256 digits, exact in any float
dtype); `compute_logits` puts the only nonzero logit on `next_id[node]`, the id of the token that
follows it in the case, so vLLM's greedy sampler generates the case's next token and the decode steps
are vLLM's own (and a draft token is accepted exactly where it is the case's).

Read back: every forward records, for each token that stands for a node, the attention output of
every layer and the rotated q and k (`out`, `q_rot`, `k_rot` [nodes][L][H D], f32), and counts how
often a node was computed (`computed` [nodes]: a prefix-cache hit computes it 0 times in a later
request, a preempted and recomputed request twice); `recompute_diff` keeps the largest difference
between two computations of the same node.

Planted bugs (config "bug"): "window+1" builds every sliding layer's Attention with W + 1;
"rope-from-slot" rotates with position mod W (the slot of a ring of W) instead of vLLM's position.
"""
import torch
from torch import nn

from vllm.config import VllmConfig
from vllm.model_executor.layers.attention import Attention
from vllm.model_executor.layers.rotary_embedding import get_rope

DIGITS = 3  # nodes < 256**3 in the hidden state
JUNK_V = 1.0e4  # the value of a token that stands for no case token (node 0)


def rope_of(layer, D, max_position, dtype):
    """vLLM's rotary embedding for a layer's RoPE (golden-format §2 'rope'), None for style 'none'."""
    rp = layer["rope"]
    if rp["style"] == "none":
        return None
    params = {"rope_type": "default", "rope_theta": float(rp["theta"])}
    if rp["scaling"] == "linear":
        params = {"rope_type": "linear", "rope_theta": float(rp["theta"]), "factor": float(rp["factor"])}
    if rp.get("rotary_dim"):
        params["rope_dim"] = int(rp["rotary_dim"])
    return get_rope(D, max_position=max_position, is_neox_style=rp["style"] == "neox", rope_parameters=params,
                    dtype=dtype)


class RingkvForCausalLM(nn.Module):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__()
        cfg = vllm_config.model_config.hf_config.ringkv
        cache_config = vllm_config.cache_config
        dtype = vllm_config.model_config.dtype
        self.Hq, self.Hkv, self.D = cfg["Hq"], cfg["Hkv"], cfg["D"]
        self.L, V = len(cfg["layers"]), cfg["vocab"]
        self.bug = cfg.get("bug")
        self.hidden = vllm_config.model_config.hf_config.hidden_size
        max_position = vllm_config.model_config.max_model_len
        self.windows = [lay["window"] for lay in cfg["layers"]]
        self.attn = nn.ModuleList()
        self.rotary = []
        self.sinks = nn.ParameterList()
        for l, lay in enumerate(cfg["layers"]):
            window = lay["window"]
            if window is not None and self.bug == "window+1":
                window += 1
            extra = {}
            if cfg.get("sink_logits"):
                sink = nn.Parameter(torch.zeros(self.Hq, dtype=torch.float32), requires_grad=False)
                self.sinks.append(sink)
                extra["sinks"] = sink
            self.attn.append(Attention(self.Hq, self.D, float(cfg["scale"]), num_kv_heads=self.Hkv,
                                       cache_config=cache_config, logits_soft_cap=cfg.get("softcap"),
                                       per_layer_sliding_window=window, prefix=f"{prefix}layers.{l}.attn", **extra))
            self.rotary.append(rope_of(lay, self.D, max_position, dtype))
        width = (self.Hq + 2 * self.Hkv) * self.D
        N, P = cfg["nodes"], cfg["max_pos"]
        f32 = dict(dtype=torch.float32)
        self.qkv = nn.Parameter(torch.zeros(N, self.L, width, dtype=dtype), requires_grad=False)
        self.register_buffer("node_of", torch.zeros(V, P, dtype=torch.long), persistent=False)
        self.register_buffer("next_id", torch.zeros(N, dtype=torch.long), persistent=False)
        self.register_buffer("out", torch.zeros(N, self.L, self.Hq * self.D, **f32), persistent=False)
        self.register_buffer("q_rot", torch.zeros(N, self.L, self.Hq * self.D, **f32), persistent=False)
        self.register_buffer("k_rot", torch.zeros(N, self.L, self.Hkv * self.D, **f32), persistent=False)
        self.register_buffer("computed", torch.zeros(N, dtype=torch.long), persistent=False)
        self.recompute_diff = 0.0

    def load_tables(self, qkv, node_of, next_id):
        """The case's tokens (numpy): qkv [nodes][L][width] (row 0 is replaced by the junk inputs),
        node_of [vocab][max_pos], next_id [nodes]; clears what was read back."""
        with torch.no_grad():
            self.qkv.copy_(torch.from_numpy(qkv).to(self.qkv.dtype))
            self.qkv[0] = 0.0
            self.qkv[0, :, (self.Hq + self.Hkv) * self.D:] = JUNK_V
            self.node_of.copy_(torch.from_numpy(node_of))
            self.next_id.copy_(torch.from_numpy(next_id))
            self.out.fill_(float("nan"))
            self.q_rot.fill_(float("nan"))
            self.k_rot.fill_(float("nan"))
            self.computed.zero_()
        self.recompute_diff = 0.0

    def embed_input_ids(self, input_ids):
        return torch.zeros(input_ids.shape[0], self.hidden, dtype=self.qkv.dtype, device=input_ids.device)

    def nodes(self, input_ids, positions):
        V, P = self.node_of.shape
        return self.node_of[input_ids.long().clamp(0, V - 1), positions.long().clamp(0, P - 1)]

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        ids = self.nodes(input_ids, positions)  # [T] nodes; 0: no case token
        rows = self.qkv[ids]  # [T][L][(Hq + 2 Hkv) D]
        nq, nk = self.Hq * self.D, self.Hkv * self.D
        valid = ids > 0
        seen = valid & (self.computed[ids] > 0)
        outs, qs, ks = [], [], []
        for l in range(self.L):
            q, k, v = rows[:, l, :nq], rows[:, l, nq:nq + nk], rows[:, l, nq + nk:]
            q, k = q.contiguous(), k.contiguous()
            if self.rotary[l] is not None:
                pos = positions
                if self.bug == "rope-from-slot" and self.windows[l] is not None:
                    pos = positions % self.windows[l]
                q, k = self.rotary[l](pos, q, k)
            outs.append(self.attn[l](q, k, v.contiguous()))
            qs.append(q)
            ks.append(k)
        out = torch.stack(outs, 1).float()
        if bool(seen.any()):
            self.recompute_diff = max(self.recompute_diff, float((self.out[ids[seen]] - out[seen]).abs().max()))
        self.out[ids[valid]] = out[valid]
        self.q_rot[ids[valid]] = torch.stack(qs, 1).float()[valid]
        self.k_rot[ids[valid]] = torch.stack(ks, 1).float()[valid]
        self.computed.index_add_(0, ids[valid].long(), torch.ones_like(ids[valid], dtype=torch.long))
        hidden = torch.zeros(ids.shape[0], self.hidden, dtype=rows.dtype, device=rows.device)
        rest = ids.clone()
        for d in range(DIGITS):
            hidden[:, d] = (rest % 256).to(rows.dtype)
            rest = rest // 256
        return hidden

    def compute_logits(self, hidden_states):
        digits = hidden_states[:, :DIGITS].float().round().long()
        ids = digits[:, 0] + 256 * digits[:, 1] + 65536 * digits[:, 2]
        logits = torch.zeros(hidden_states.shape[0], self.node_of.shape[0], dtype=torch.float32,
                             device=hidden_states.device)
        logits[torch.arange(ids.shape[0]), self.next_id[ids]] = 1.0
        return logits

    def load_weights(self, weights):
        return {name for name, _ in self.named_parameters()}  # the tables are filled per run (adapter.py)


def register():
    from vllm import ModelRegistry
    if "RingkvForCausalLM" not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model("RingkvForCausalLM", RingkvForCausalLM)
