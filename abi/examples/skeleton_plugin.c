/* A complete ringkv engine plugin in plain C99: the skeleton of docs/engine-abi.md.
 *
 * A deliberately naive engine: f32 K/V, a full-history cache of max_tokens rows per (layer,
 * sequence) allocated at create(), sinks and windows by the spec's rule, softmax in f32. It asks
 * ringkv for q and k already rotated (wants_rotated_qk), so it needs no RoPE code. No snapshot, no
 * softcap, no sink logits: it declares so, and ringkv tests it only inside that.
 * Replace the marked parts with your engine.
 *
 * Build: cc -std=c99 -O2 -fPIC -shared $(pkg-config --cflags ringkv-abi) skeleton_plugin.c -o libmyengine.so -lm
 *        (an installed ringkv: share/ringkv/examples/skeleton_plugin.c; in the source tree -I<ringkv>/abi/include)
 * Check: ringkv check --engine ./libmyengine.so   (or abi's plugin_engine_factory("./libmyengine.so"))
 * Fail:  add -DRINGKV_SKELETON_WINDOW_PLUS_ONE to plant a window one key too wide, and read the report.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringkv/engine_abi.h"

struct ringkv_engine {
  int64_t layers, hq, hkv, dim, batch, max_tokens;
  int64_t* window; /* [layers] W (spec convention) */
  int64_t* sinks;  /* [layers] S */
  float scale;     /* softmax scale */
  float* k;        /* [layers][batch][max_tokens][hkv][dim] */
  float* v;
  int64_t* seen;   /* [batch] tokens since the last reset */
  char error[512]; /* last_error(): valid until the next call on this handle */
};

/* ---- a tiny reader for the compact JSON ringkv sends (use a real JSON library in your engine) ---- */
static const char* find_key(const char* from, const char* key) {
  char pattern[64];
  const char* p;
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  p = strstr(from, pattern);
  return p ? p + strlen(pattern) : NULL;
}
static int read_int(const char* json, const char* key, int64_t* out) {
  const char* p = find_key(json, key);
  if (!p) return 0;
  *out = (int64_t)strtoll(p, NULL, 10);
  return 1;
}

static int is_f32(const char* json, const char* format) {
  const char* p = find_key(json, format);
  p = p ? find_key(p, "dtype") : NULL;
  return p && strncmp(p, "\"f32\"", 5) == 0;
}

static ringkv_status get_capabilities(ringkv_capabilities* caps) {
  if (!caps || caps->struct_size < sizeof(ringkv_capabilities)) return RINGKV_ERR_INVALID_ARGUMENT;
  caps->k_dtypes = 1u << RINGKV_DTYPE_F32;
  caps->v_dtypes = 1u << RINGKV_DTYPE_F32;
  caps->rope_styles = (1u << RINGKV_ROPE_NONE) | (1u << RINGKV_ROPE_NEOX) | (1u << RINGKV_ROPE_GPTJ);
  caps->rope_scalings = (1u << RINGKV_ROPE_SCALING_NONE) | (1u << RINGKV_ROPE_SCALING_LINEAR) |
                        (1u << RINGKV_ROPE_SCALING_NTK);
  caps->wants_rotated_qk = 1; /* ringkv rotates, so every rope config works */
  caps->sinks = 1;
  caps->deterministic = 1;
  caps->window_convention = RINGKV_WINDOW_W;
  caps->threading = RINGKV_THREADING_ONE_ENGINE_PER_THREAD;
  caps->max_tokens = 1 << 16;
  /* ABI 1.2: ringkv rotates q and k, so per-layer RoPE, partial rotary and any start position work;
     every layer keeps its own window, so any number of sliding windows, W = 1 included. */
  caps->max_sliding_windows = 0; /* 0 = any */
  caps->per_layer_rope = 1;
  caps->partial_rotary = 1;
  caps->settable_p0 = 1;
  caps->min_window = 0;   /* 0 = 1: W = 1 works */
  caps->max_position = 0; /* 0 = any */
  caps->kv_formats_differ = 1; /* K and V dtypes are checked apart */
  caps->precision.struct_size = (uint32_t)sizeof caps->precision;
  caps->precision.q_dot = RINGKV_PRECISION_F32;
  caps->precision.k_storage = RINGKV_PRECISION_AS_CONFIGURED;
  caps->precision.v_storage = RINGKV_PRECISION_AS_CONFIGURED;
  caps->precision.accumulator = RINGKV_PRECISION_F32;
  caps->precision.p_before_pv = RINGKV_PRECISION_F32;
  caps->precision.output = RINGKV_PRECISION_F32;
  caps->precision.rope_angle = RINGKV_PRECISION_F64; /* ringkv's rotation */
  snprintf(caps->name, sizeof caps->name, "skeleton-c");
  return RINGKV_OK;
}

static void destroy(ringkv_engine* e) {
  if (!e) return;
  free(e->window);
  free(e->sinks);
  free(e->k);
  free(e->v);
  free(e->seen);
  free(e);
}

static ringkv_status create(const char* json, size_t size, ringkv_engine** out, char* error, size_t error_size) {
  ringkv_engine* e;
  const char *layers, *p, *scale;
  int64_t l, n;
  (void)size;
  *out = NULL;
#define FAIL(...) do { if (error && error_size) snprintf(error, error_size, __VA_ARGS__); destroy(e); return RINGKV_ERR_CONFIG; } while (0)
  e = (ringkv_engine*)calloc(1, sizeof *e);
  if (!e) return RINGKV_ERR_OUT_OF_MEMORY;
  if (!strstr(json, "\"qk_rotated\":true")) FAIL("config.qk_rotated: this engine needs rotated q and k");
  if (!read_int(json, "num_q_heads", &e->hq) || !read_int(json, "num_kv_heads", &e->hkv) ||
      !read_int(json, "head_dim", &e->dim) || !read_int(json, "batch", &e->batch) ||
      !read_int(json, "max_tokens", &e->max_tokens)) {
    FAIL("config: a field is missing");
  }
  if (!is_f32(json, "k_format")) FAIL("config.k_format.dtype: only f32 is supported");
  if (!is_f32(json, "v_format")) FAIL("config.v_format.dtype: only f32 is supported");
  if (!strstr(json, "\"softcap\":null")) FAIL("config.softcap: not supported");
  if (!strstr(json, "\"sink_logits\":[]")) FAIL("config.sink_logits: not supported");
  scale = find_key(json, "softmax_scale");
  e->scale = (scale && strncmp(scale, "null", 4) != 0) ? (float)strtod(scale, NULL) : 1.0f / sqrtf((float)e->dim);
  /* Layers: each object holds "window": and "sinks": (ringkv writes keys in sorted order). */
  layers = find_key(json, "layers");
  if (!layers) FAIL("config.layers: missing");
  for (e->layers = 0, p = layers; (p = find_key(p, "window")) != NULL && p < find_key(json, "max_tokens");) e->layers++;
  e->window = (int64_t*)calloc((size_t)e->layers, sizeof(int64_t));
  e->sinks = (int64_t*)calloc((size_t)e->layers, sizeof(int64_t));
  for (l = 0, p = layers; l < e->layers; ++l) {
    p = find_key(p, "sinks");
    e->sinks[l] = (int64_t)strtoll(p, NULL, 10);
    p = find_key(p, "window");
    e->window[l] = (int64_t)strtoll(p, NULL, 10);
  }
  /* YOUR ENGINE: allocate its whole cache here. */
  n = e->layers * e->batch * e->max_tokens * e->hkv * e->dim;
  e->k = (float*)calloc((size_t)n, sizeof(float));
  e->v = (float*)calloc((size_t)n, sizeof(float));
  e->seen = (int64_t*)calloc((size_t)e->batch, sizeof(int64_t));
  if (!e->window || !e->sinks || !e->k || !e->v || !e->seen) FAIL("out of memory");
#undef FAIL
  *out = e;
  return RINGKV_OK;
}

static const char* last_error(ringkv_engine* e) { return e ? e->error : ""; }

/* Element (l, t, h, d) of a tensor, honouring its strides. */
static float* at(const ringkv_tensor* t, int64_t l, int64_t i, int64_t h, int64_t d) {
  return (float*)t->data + l * t->strides[0] + i * t->strides[1] + h * t->strides[2] + d * t->strides[3];
}
static float* row(const ringkv_engine* e, float* cache, int64_t l, int64_t s, int64_t j, int64_t h) {
  return cache + ((((l * e->batch + s) * e->max_tokens + j) * e->hkv + h) * e->dim);
}

static ringkv_status step_error(ringkv_engine* e, const char* what, uint32_t index) {
  snprintf(e->error, sizeof e->error, "step.%s[%u]: invalid (see spec 12.2)", what, index);
  return RINGKV_ERR_STEP;
}

static ringkv_status step(ringkv_engine* e, const ringkv_batch* b) {
  uint32_t a, r, a2;
  int64_t l, i, j, h, d, g = e->hq / e->hkv;
  e->error[0] = '\0';
  /* 1. Check everything before changing anything. */
  for (r = 0; r < b->num_resets; ++r) {
    const ringkv_reset* rs = ringkv_batch_reset(b, r);
    if (rs->sequence < 0 || rs->sequence >= e->batch || rs->start_position < 0 ||
        rs->start_position > (((int64_t)1) << 31) - e->max_tokens) return step_error(e, "resets", r);
  }
  for (a = 0; a < b->num_appends; ++a) {
    const ringkv_append* ap = ringkv_batch_append(b, a);
    int64_t held;
    if (ap->sequence < 0 || ap->sequence >= e->batch) return step_error(e, "appends", a);
    held = e->seen[ap->sequence];
    for (r = 0; r < b->num_resets; ++r) if (ringkv_batch_reset(b, r)->sequence == ap->sequence) held = 0;
    for (a2 = 0; a2 < a; ++a2) if (ringkv_batch_append(b, a2)->sequence == ap->sequence) return step_error(e, "appends", a);
    if (ap->n_tokens < 1 || ap->n_tokens > e->max_tokens - held) return step_error(e, "appends", a);
    if (!ap->q.data || !ap->k.data || !ap->v.data || !ap->out.data) return step_error(e, "appends", a);
    for (l = 0; l < e->layers; ++l)
      for (i = 0; i < ap->n_tokens; ++i)
        for (d = 0; d < e->dim; ++d) {
          for (h = 0; h < e->hq; ++h) if (!isfinite(*at(&ap->q, l, i, h, d))) return step_error(e, "appends", a);
          for (h = 0; h < e->hkv; ++h)
            if (!isfinite(*at(&ap->k, l, i, h, d)) || !isfinite(*at(&ap->v, l, i, h, d))) return step_error(e, "appends", a);
        }
  }
  /* 2. Resets, then each chunk token by token: store it, then attend (spec §4). */
  for (r = 0; r < b->num_resets; ++r) e->seen[ringkv_batch_reset(b, r)->sequence] = 0;
  for (a = 0; a < b->num_appends; ++a) {
    const ringkv_append* ap = ringkv_batch_append(b, a);
    const int64_t s = ap->sequence, first = e->seen[s];
    for (l = 0; l < e->layers; ++l) {
      for (i = 0; i < ap->n_tokens; ++i) {
        const int64_t qi = first + i; /* the token's index since the reset */
        for (h = 0; h < e->hkv; ++h)
          for (d = 0; d < e->dim; ++d) {
            row(e, e->k, l, s, qi, h)[d] = *at(&ap->k, l, i, h, d);
            row(e, e->v, l, s, qi, h)[d] = *at(&ap->v, l, i, h, d);
          }
        /* YOUR ENGINE: the attention kernel. Query qi sees key j iff j <= qi and (j < S or j > qi - W) (spec §2). */
#ifdef RINGKV_SKELETON_WINDOW_PLUS_ONE /* a planted bug, to see what a failure report looks like */
        const int64_t W = e->window[l] + 1;
#else
        const int64_t W = e->window[l];
#endif
        const int64_t lo = qi - W + 1 > 0 ? qi - W + 1 : 0;             /* oldest key of the window */
        const int64_t sink_end = e->sinks[l] < lo ? e->sinks[l] : lo;           /* sinks below the window */
        for (h = 0; h < e->hq; ++h) {
          const int64_t kvh = h / g;
          float m = -INFINITY, sum = 0.0f;
          for (j = sink_end > 0 ? 0 : lo; j <= qi; j = (j + 1 == sink_end) ? lo : j + 1) { /* visible keys: [0, sink_end) + [lo, qi] */
            float sc = 0.0f;
            for (d = 0; d < e->dim; ++d) sc += *at(&ap->q, l, i, h, d) * row(e, e->k, l, s, j, kvh)[d];
            if (sc * e->scale > m) m = sc * e->scale;
          }
          for (d = 0; d < e->dim; ++d) *at(&ap->out, l, i, h, d) = 0.0f;
          for (j = sink_end > 0 ? 0 : lo; j <= qi; j = (j + 1 == sink_end) ? lo : j + 1) {
            float sc = 0.0f, p;
            for (d = 0; d < e->dim; ++d) sc += *at(&ap->q, l, i, h, d) * row(e, e->k, l, s, j, kvh)[d];
            p = expf(sc * e->scale - m);
            sum += p;
            for (d = 0; d < e->dim; ++d) *at(&ap->out, l, i, h, d) += p * row(e, e->v, l, s, j, kvh)[d];
          }
          for (d = 0; d < e->dim; ++d) *at(&ap->out, l, i, h, d) /= sum;
        }
      }
    }
    e->seen[s] += ap->n_tokens;
  }
  return RINGKV_OK;
}

static ringkv_status reset(ringkv_engine* e, int32_t sequence, int64_t start_position) {
  ringkv_reset r;
  ringkv_batch b;
  memset(&r, 0, sizeof r);
  memset(&b, 0, sizeof b);
  r.struct_size = (uint32_t)sizeof r;
  r.sequence = sequence;
  r.start_position = start_position;
  b.struct_size = (uint32_t)sizeof b;
  b.num_resets = 1;
  b.resets = &r;
  return step(e, &b);
}

static ringkv_status cache_bytes(ringkv_engine* e, uint64_t* bytes) {
  *bytes = (uint64_t)(2 * e->layers * e->batch * e->max_tokens * e->hkv * e->dim) * sizeof(float);
  return RINGKV_OK;
}

/* Test hook: NaN in every row no token occupies, so attending to one shows. */
static ringkv_status poison_empty_slots(ringkv_engine* e) {
  int64_t l, s, j, h, d;
  for (l = 0; l < e->layers; ++l)
    for (s = 0; s < e->batch; ++s)
      for (j = e->seen[s]; j < e->max_tokens; ++j)
        for (h = 0; h < e->hkv; ++h)
          for (d = 0; d < e->dim; ++d) row(e, e->k, l, s, j, h)[d] = row(e, e->v, l, s, j, h)[d] = NAN;
  return RINGKV_OK;
}

RINGKV_ABI_EXPORT const ringkv_engine_api* ringkv_engine_api_get(uint32_t host_abi_major) {
  static ringkv_engine_api api;
  (void)host_abi_major;
  memset(&api, 0, sizeof api);
  api.struct_size = (uint32_t)sizeof api;
  api.abi_version = RINGKV_ABI_VERSION;
  api.get_capabilities = get_capabilities;
  api.create = create;
  api.destroy = destroy;
  api.last_error = last_error;
  api.get_info = NULL; /* optional: the capabilities' profile holds for every config */
  api.step = step;
  api.reset = reset;
  api.snapshot = NULL; /* optional: no exact storage checks */
  api.cache_bytes = cache_bytes;
  api.poison_empty_slots = poison_empty_slots;
  return &api;
}
