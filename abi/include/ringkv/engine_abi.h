/*
 * ringkv engine ABI: the C interface through which a third-party engine plugs
 * into ringkv's conformance suite (ringkv check --engine PATH.so).
 *
 * C only (C99 and C++), no exceptions across it. A plugin is a shared library
 * that exports exactly one symbol:
 *
 *     RINGKV_ABI_EXPORT const ringkv_engine_api* ringkv_engine_api_get(uint32_t host_abi_major);
 *
 * returning a table of function pointers (static storage, valid until the
 * library is unloaded). Read docs/engine-abi.md for the whole contract, a C
 * skeleton to paste and the build line. Summary:
 *
 *  - Versions. RINGKV_ABI_VERSION_MAJOR changes on any incompatible change;
 *    the host refuses a plugin whose major differs, naming both versions.
 *    RINGKV_ABI_VERSION_MINOR grows when fields or functions are appended at
 *    the end of a struct or of the table; older readers ignore them. Zero in
 *    an appended field means what the older minors assumed, so a plugin
 *    recompiled against a newer header is judged as before; the one exception
 *    is ABI 1.2, whose zeros narrow (see its fields below; a plugin that leaves
 *    all seven at zero is warned at load). docs/engine-abi.md, "Minor versions".
 *  - Sizes. Every struct starts with `uint32_t struct_size`, set by whoever
 *    creates the struct to sizeof(struct) in its header version. A reader
 *    touches a field only if it lies within struct_size (RINGKV_HAS_FIELD).
 *    Arrays of structs are strided by their first element's struct_size
 *    (ringkv_batch_reset() / ringkv_batch_append() /
 *    ringkv_batch_rollback() below do it for you).
 *  - Errors. Every function that can fail returns ringkv_status. After a
 *    failure on an engine, last_error(engine) returns a NUL-terminated UTF-8
 *    message owned by the engine and VALID UNTIL THE NEXT CALL ON THAT HANDLE
 *    (any function taking it) or its destruction. create() writes its message
 *    into a caller-provided buffer instead, since there is no handle yet.
 *  - No exceptions, longjmp or signals may leave a plugin function. A C++
 *    plugin catches everything at the boundary (abi/src/export_engine.hpp
 *    does it for you).
 *  - Threading: see ringkv_threading. ringkv itself calls a plugin from one
 *    thread of one worker process (docs/engine-abi.md, "The worker").
 */
#ifndef RINGKV_ENGINE_ABI_H
#define RINGKV_ENGINE_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Casts that stay quiet under C++ -Wold-style-cast. */
#ifdef __cplusplus
#define RINGKV_ABI_U32(x) static_cast<uint32_t>(x)
#define RINGKV_ABI_PTR(type, p) reinterpret_cast<type>(p)
#else
#define RINGKV_ABI_U32(x) ((uint32_t)(x))
#define RINGKV_ABI_PTR(type, p) ((type)(p))
#endif

/* ------------------------------------------------------------------ versions */

#define RINGKV_ABI_VERSION_MAJOR 1u
#define RINGKV_ABI_VERSION_MINOR 3u
/** (major << 16) | minor: the value a table's abi_version carries. */
#define RINGKV_ABI_MAKE_VERSION(major, minor) RINGKV_ABI_U32((RINGKV_ABI_U32(major) << 16) | RINGKV_ABI_U32(minor))
#define RINGKV_ABI_VERSION RINGKV_ABI_MAKE_VERSION(RINGKV_ABI_VERSION_MAJOR, RINGKV_ABI_VERSION_MINOR)
#define RINGKV_ABI_VERSION_GET_MAJOR(v) (RINGKV_ABI_U32(v) >> 16)
#define RINGKV_ABI_VERSION_GET_MINOR(v) (RINGKV_ABI_U32(v) & 0xffffu)

/** Name of the one exported symbol, for dlsym. */
#define RINGKV_ENGINE_API_SYMBOL "ringkv_engine_api_get"

#if defined(_WIN32)
#define RINGKV_ABI_EXPORT __declspec(dllexport)
#else
#define RINGKV_ABI_EXPORT __attribute__((visibility("default")))
#endif

/** True if `field` of struct type `type` lies within ptr->struct_size bytes. */
#define RINGKV_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof((ptr)->field))

/* ------------------------------------------------------------------ errors */

/** Result of every fallible call. Values are stable across minor versions. */
typedef enum ringkv_status {
  RINGKV_OK = 0,
  /** A pointer is NULL, a struct_size is too small, a descriptor is malformed. */
  RINGKV_ERR_INVALID_ARGUMENT = 1,
  /** The config is invalid or outside the engine's capabilities (ringkv reports the case as skipped
      or failed with the message; ringkv::ConfigError on the host side). */
  RINGKV_ERR_CONFIG = 2,
  /** A step, reset or snapshot request is invalid for the engine's config (spec §12.2: sequence out of
      range, too many tokens, non-finite input, ...); the engine MUST then have changed nothing
      (ringkv::StepError on the host side, with the engine's message). ABI 1.3: also a REFUSED
      rollback (spec 1.1 §5.1.4), whose message contains the word "refused" (see ringkv_rollback). */
  RINGKV_ERR_STEP = 3,
  /** The optional function or the requested feature is not supported. */
  RINGKV_ERR_UNSUPPORTED = 4,
  RINGKV_ERR_OUT_OF_MEMORY = 5,
  /** Anything else (a bug, a device error). The engine may be unusable afterwards. */
  RINGKV_ERR_INTERNAL = 6,
  /** The host's ABI major version is not one the plugin implements. */
  RINGKV_ERR_VERSION = 7
} ringkv_status;

/* ------------------------------------------------------------------ enums
 * Enum values are used as int32_t fields (never as enum-typed fields, whose
 * size C leaves to the compiler) and as bit positions in uint32_t masks:
 * bit (1u << value). */

/** Element types: storage formats of K and V (spec §10), and tensor element types. */
typedef enum ringkv_dtype {
  RINGKV_DTYPE_F32 = 0,
  RINGKV_DTYPE_F16 = 1,
  RINGKV_DTYPE_BF16 = 2,
  RINGKV_DTYPE_FP8_E4M3 = 3,
  RINGKV_DTYPE_FP8_E5M2 = 4,
  RINGKV_DTYPE_INT8 = 5
} ringkv_dtype;

/** INT8 grouping and scale scheme (spec §10.4). */
typedef enum ringkv_int8_scheme {
  RINGKV_INT8_PER_HEAD = 0,      /**< one f32 scale per (token, kv head) row */
  RINGKV_INT8_Q8_0 = 1,          /**< groups of 32, scale stored as f16 */
  RINGKV_INT8_STATIC_TENSOR = 2  /**< one scale from the config for the whole tensor */
} ringkv_int8_scheme;

/** Rounding of x/scale to an INT8 code (spec §10.5). */
typedef enum ringkv_rounding {
  RINGKV_ROUNDING_NEAREST_EVEN = 0,
  RINGKV_ROUNDING_HALF_AWAY = 1
} ringkv_rounding;

/** RoPE pairing (spec §8). */
typedef enum ringkv_rope_style {
  RINGKV_ROPE_NONE = 0,
  RINGKV_ROPE_NEOX = 1,  /**< pairs (x[k], x[k + R/2]) */
  RINGKV_ROPE_GPTJ = 2   /**< pairs (x[2k], x[2k + 1]) */
} ringkv_rope_style;

/** RoPE scaling (spec §8). */
typedef enum ringkv_rope_scaling {
  RINGKV_ROPE_SCALING_NONE = 0,
  RINGKV_ROPE_SCALING_LINEAR = 1,  /**< position / factor */
  RINGKV_ROPE_SCALING_NTK = 2      /**< theta * factor^(R/(R-2)) */
} ringkv_rope_scaling;

/** How the engine counts its sliding window (spec §2.1). */
typedef enum ringkv_window_convention {
  /** The spec's W: query i sees keys j with i - W < j <= i (W keys including itself; HF, Mistral,
      llama.cpp n_swa). The config JSON carries layers[l].window = W. */
  RINGKV_WINDOW_W = 0,
  /** "left" = W - 1 (FlashAttention window_size=(left, 0), FlashInfer window_left): keys in
      [i - left, i]. The config JSON then carries layers[l].window_left = W - 1 INSTEAD of
      layers[l].window (which is absent, so it cannot be misread), and "window_convention": "left". */
  RINGKV_WINDOW_LEFT = 1
} ringkv_window_convention;

/** Precisions of a precision profile (ringkv::Precision, spec §11.4). */
typedef enum ringkv_precision {
  RINGKV_PRECISION_F64 = 0,
  RINGKV_PRECISION_F32 = 1,
  RINGKV_PRECISION_TF32 = 2,
  RINGKV_PRECISION_F16 = 3,
  RINGKV_PRECISION_BF16 = 4,
  RINGKV_PRECISION_FP8_E4M3 = 5,
  RINGKV_PRECISION_FP8_E5M2 = 6,
  RINGKV_PRECISION_INT8 = 7,
  /** Only for k_storage / v_storage in ringkv_capabilities.precision: "exactly the dtype the
      config asks for" (f32 -> f32, f16 -> f16, int8 -> int8, ...). */
  RINGKV_PRECISION_AS_CONFIGURED = 100
} ringkv_precision;

/** Threading rule of the engine. */
typedef enum ringkv_threading {
  /** Each engine handle is used by one thread at a time (different handles may be used from
      different threads concurrently). get_capabilities and create may be called from any thread. */
  RINGKV_THREADING_ONE_ENGINE_PER_THREAD = 0,
  /** Any function may be called on any handle from any thread concurrently. */
  RINGKV_THREADING_THREAD_SAFE = 1,
  /** All calls, on every handle, from one and the same thread (e.g. a CUDA context bound to it). */
  RINGKV_THREADING_SINGLE_THREAD = 2
} ringkv_threading;

/** Where a tensor's data lives. */
typedef enum ringkv_memory {
  RINGKV_MEMORY_HOST = 0,   /**< ordinary CPU memory */
  RINGKV_MEMORY_DEVICE = 1  /**< device memory of ringkv_tensor.device_index (CUDA: a device pointer) */
} ringkv_memory;

/* ------------------------------------------------------------------ precision profile */

/** How the engine computes (spec §11.4). The tolerance bound (docs/tolerances.md) takes every field
    as an input: declare what the engine really does; a lie in either direction fails. All fields are
    ringkv_precision values. */
typedef struct ringkv_precision_profile {
  uint32_t struct_size;  /**< sizeof(ringkv_precision_profile) */
  int32_t q_dot;         /**< precision of the (rotated) q as it enters q.k; the reference: F32 */
  int32_t k_storage;     /**< what K is stored as; AS_CONFIGURED (capabilities only) or a precision */
  int32_t v_storage;     /**< what V is stored as; likewise */
  int32_t accumulator;   /**< accumulation of q.k, of the softmax sums and of P.V (profile 1; ABI 1.1 can
                              split it: ringkv_precision_profile2) */
  int32_t p_before_pv;   /**< precision P is rounded to before P.V */
  int32_t output;        /**< precision the output is rounded to (before ringkv reads it as f32) */
  int32_t rope_angle;    /**< precision of position * inv_freq and of cos/sin; the reference: F64 */
} ringkv_precision_profile;

/** How q is quantised for q.k (ringkv::QueryQuant), beyond rounding it to q_dot. */
typedef enum ringkv_q_quant {
  RINGKV_Q_QUANT_NONE = 0,
  /** blocks of 32 of the rotated q, scale max|q|/127 stored as f16, codes round(q/scale):
      ggml quantises q so when K is q8_0 */
  RINGKV_Q_QUANT_Q8_0 = 1
} ringkv_q_quant;

/** Precision profile 2 (ABI 1.1): appended, as `precision2`, to ringkv_capabilities and
    ringkv_engine_info after their 1.0 fields. The host zeroes it and sets struct_size. A plugin built
    against ABI 1.0 leaves it zero, which means what profile 1 says: q.k and P.V both accumulate in
    precision.accumulator and q is not quantised. */
typedef struct ringkv_precision_profile2 {
  uint32_t struct_size;        /**< set by the host: sizeof(ringkv_precision_profile2) */
  /** Nonzero: qk_accumulator and pv_accumulator below replace precision.accumulator (set that one to
      the coarser of the two, which is what an ABI 1.0 host reads). */
  int32_t split_accumulators;
  int32_t qk_accumulator;      /**< a ringkv_precision: q.k, the scores, the softmax sum and the division by it */
  int32_t pv_accumulator;      /**< a ringkv_precision: the P.V sum */
  int32_t q_quant;             /**< a ringkv_q_quant; 0 = none */
} ringkv_precision_profile2;

/* ------------------------------------------------------------------ capabilities */

#define RINGKV_MAX_HEAD_DIMS 32
#define RINGKV_NAME_SIZE 64

/** What the engine supports. ringkv generates cases only inside it and reports what it skipped.
    The host zeroes the struct and sets struct_size; the plugin fills every field it knows of that
    lies within struct_size. "0 = any" fields mean no limit beyond the spec's (§12.1). A field outside
    its documented range (a count beyond its array, a negative limit, an unknown enum value or mask
    bit, a min above its max) refuses the plugin at load, naming it (docs/engine-abi.md, "The ranges"). */
typedef struct ringkv_capabilities {
  uint32_t struct_size;       /**< set by the host: sizeof(ringkv_capabilities) */
  uint32_t k_dtypes;          /**< storage dtypes of K: bit (1u << RINGKV_DTYPE_x) each; F32 is expected */
  uint32_t v_dtypes;          /**< storage dtypes of V, likewise */
  uint32_t int8_schemes;      /**< bit (1u << RINGKV_INT8_x) per scheme, if INT8 is in a dtype mask */
  uint32_t int8_roundings;    /**< bit (1u << RINGKV_ROUNDING_x); 0 means nearest-even only */
  uint32_t rope_styles;       /**< bit (1u << RINGKV_ROPE_x); NONE should always be set */
  uint32_t rope_scalings;     /**< bit (1u << RINGKV_ROPE_SCALING_x) */
  /** Nonzero: ringkv passes q and k ALREADY ROTATED per spec §8 (true positions, f64 angles, rounded
      once to f32), and the engine MUST NOT rotate them. The config JSON still carries each layer's rope
      (for information) plus "qk_rotated": true. K is then stored as received. rope_styles and
      rope_scalings still say which configs the engine accepts (usually all, since ringkv rotates). */
  int32_t wants_rotated_qk;
  int32_t sinks;              /**< nonzero: sink tokens (layers[l].sinks > 0) supported */
  int32_t sink_logits;        /**< nonzero: learned sink logits (config "sink_logits") supported */
  int32_t softcap;            /**< nonzero: logit softcap supported */
  int32_t snapshot;           /**< nonzero: snapshot() is implemented (the exact storage checks run) */
  int32_t deterministic;      /**< nonzero: same inputs give the same bits whatever the chunking, the
                                   batch composition and the order of appends (bitwise checks apply) */
  int32_t window_convention;  /**< a ringkv_window_convention */
  int32_t threading;          /**< a ringkv_threading */
  int32_t max_layers;         /**< most layers per config; 0 = any (<= 1024) */
  int32_t max_batch;          /**< most sequences per config; 0 = any */
  uint32_t num_head_dims;     /**< entries used in head_dims; 0 = any head_dim in [1, 1024] */
  int32_t head_dims[RINGKV_MAX_HEAD_DIMS];  /**< supported head dims, e.g. {64, 128, 256} */
  int64_t max_window;         /**< largest W (spec convention) of a sliding layer; 0 = any */
  int64_t max_tokens;         /**< largest config max_tokens; 0 = any */
  /** The engine's precision profile. k_storage / v_storage are usually RINGKV_PRECISION_AS_CONFIGURED.
      If the profile depends on the config in other ways, implement get_info too, which overrides it per
      engine. */
  ringkv_precision_profile precision;
  char name[RINGKV_NAME_SIZE];  /**< NUL-terminated short name for reports, e.g. "myengine-0.3-f16" */
  /** ABI 1.1: split accumulators and q quantisation; all zero = profile 1 (see ringkv_precision_profile2). */
  ringkv_precision_profile2 precision2;
  /* ABI 1.2: the rest of the "spec 1 core" level (docs/spec.md §0). ringkv reads these only from a
     plugin whose ringkv_engine_api.abi_version has minor >= 2; an older plugin is taken to support
     everything they describe, as ABI 1.1 assumed. A sliding layer is one with W < max_tokens. */
  int32_t max_sliding_windows;  /**< most distinct W over the sliding layers of one config; 0 = any.
                                     1: one sliding window besides full-attention layers (core) */
  int32_t per_layer_rope;       /**< nonzero: layers may differ in RoPE (style, theta, rotary dim, scaling) */
  int32_t partial_rotary;       /**< nonzero: rotary_dim < head_dim supported */
  int32_t settable_p0;          /**< nonzero: start and reset positions other than 0 (core needs it) */
  int64_t min_window;           /**< smallest W (spec convention) of a sliding layer; 0 = 1. An engine
                                     whose left-window convention cannot say W = 1 declares 2 */
  int64_t max_position;         /**< largest true position p0 + index; 0 = any (< 2^31) */
  int32_t kv_formats_differ;    /**< nonzero: K and V may be in different formats (dtype, INT8 scheme,
                                     rounding or scale); 0: always one format for both (core) */
  /* ABI 1.3: spec 1.1 rollback (docs/spec.md §5.1). ringkv reads these only from a plugin whose
     abi_version has minor >= 3; an older plugin is taken NOT to support rollback (max reserve 0): it
     is never sent a rollback nor a nonzero rollback_reserve, and rollback cases are not applicable to
     it. Layout (LP64): `reserved_1_3` fills the 4 bytes of tail padding that ended the 1.2 struct
     (offset 372, sizeof 376), so that no 1.3 field overlaps a 1.2 struct (RINGKV_HAS_FIELD is false
     for both on a 1.2 struct_size) and max_rollback_reserve is 8-aligned (offset 376); rollback
     follows at 384, and the struct again ends in 4 bytes of tail padding (sizeof 392). */
  int32_t reserved_1_3;          /**< 0 */
  int64_t max_rollback_reserve;  /**< largest layers[l].rollback_reserve the engine accepts, in [0, 2^30];
                                      read only when rollback is 1 (else taken as 0) */
  int32_t rollback;              /**< 1: ringkv_batch.rollbacks are honoured or refused as spec 1.1 §5.1
                                      says (see ringkv_rollback); 0: no rollback, never sent one */
} ringkv_capabilities;

/** Per-engine information (optional get_info). The host zeroes it and sets struct_size. */
typedef struct ringkv_engine_info {
  uint32_t struct_size;            /**< set by the host: sizeof(ringkv_engine_info) */
  int32_t deterministic;           /**< as in ringkv_capabilities, for this engine's config */
  ringkv_precision_profile precision;  /**< for this engine's config; AS_CONFIGURED is not allowed here */
  char name[RINGKV_NAME_SIZE];     /**< NUL-terminated; empty: the capabilities' name */
  ringkv_precision_profile2 precision2;  /**< ABI 1.1; as in ringkv_capabilities, for this engine's config */
} ringkv_engine_info;

/* ------------------------------------------------------------------ tensors */

/** A strided view of caller-owned memory. OWNERSHIP: the memory belongs to the caller and is BORROWED
    for the duration of the call that receives the descriptor only; the engine MUST NOT keep the pointer
    after returning (copy what it needs). The engine MUST NOT write to input tensors, and MUST write
    every element of an output tensor and nothing outside it (ringkv surrounds every output buffer with
    guard bands and fails the case on a write past either end). */
typedef struct ringkv_tensor {
  uint32_t struct_size;  /**< sizeof(ringkv_tensor) */
  int32_t dtype;         /**< a ringkv_dtype; ABI 1.0: always RINGKV_DTYPE_F32 */
  int32_t memory;        /**< a ringkv_memory; ABI 1.0: ringkv always passes RINGKV_MEMORY_HOST */
  int32_t device_index;  /**< device ordinal when memory is DEVICE, else 0 */
  uint32_t ndim;         /**< dimensions used in shape/strides; ABI 1.0: always 4 */
  uint32_t reserved0;    /**< 0 */
  int64_t shape[4];      /**< extent of each dimension (outermost first); unused ones are 1 */
  int64_t strides[4];    /**< distance between consecutive indices of each dimension, in ELEMENTS (not
                              bytes); ringkv passes contiguous row-major tensors, but read the strides */
  void* data;            /**< element (0,0,0,0); const for inputs */
} ringkv_tensor;

/* ------------------------------------------------------------------ steps */

/** Starts a sequence afresh at position p0 (spec §5): it sees nothing of what it held before. */
typedef struct ringkv_reset {
  uint32_t struct_size;    /**< sizeof(ringkv_reset) */
  int32_t sequence;        /**< in [0, batch) */
  int64_t start_position;  /**< p0 in [0, 2^31 - max_tokens] */
} ringkv_reset;

/** n_tokens new tokens of one sequence (a prefill chunk, or 1 for decode), all layers at once. Token t
    of the chunk has index held + t since the sequence's last reset and true position p0 + held + t.
    Shapes (f32, layer outermost):
      q, out: [layers][n_tokens][num_q_heads][head_dim]
      k, v:   [layers][n_tokens][num_kv_heads][head_dim]
    q and k are NOT rotated, unless the engine set wants_rotated_qk. */
typedef struct ringkv_append {
  uint32_t struct_size;  /**< sizeof(ringkv_append) */
  int32_t sequence;      /**< in [0, batch), at most once per batch */
  int64_t n_tokens;      /**< >= 1 */
  ringkv_tensor q;       /**< input */
  ringkv_tensor k;       /**< input */
  ringkv_tensor v;       /**< input */
  ringkv_tensor out;     /**< output: the attention output of every token, layer and q head */
} ringkv_append;

/** ABI 1.3: takes back the last n_tokens tokens appended to a sequence since its last reset (spec 1.1
    §5.1, a rejected draft of speculative decoding). Sent only to an engine that declared
    ringkv_capabilities.rollback = 1.
    - n_tokens in [1, held], held = the tokens the sequence holds before the step; a sequence appears
      at most once among a step's rollbacks, and is not also reset in that step (else RINGKV_ERR_STEP,
      naming the field: "step.rollbacks[r].n_tokens = 9: must be in [1, 4]: ...").
    - Afterwards the sequence holds m = held - n_tokens tokens; its next token takes index m and
      position p0 + m (p0 unchanged). Later outputs are as if the removed tokens had never been
      appended (bit-identical for a deterministic engine). All layers roll back together.
    - Honour rule (§5.1.2): the rollback is honoured iff in every sliding layer the keys a later query
      sees are still in their slots, decided from the high-water mark H_l (the most tokens held since
      the reset, with the exceptions of §5.1.2), the sinks, W, rollback_reserve and the ring capacity
      min(S + W + Q, max_tokens). An engine MUST refuse exactly what the rule refuses, even if its
      storage could keep more.
    - A REFUSED rollback rejects the whole step: step() returns RINGKV_ERR_STEP and the engine changes
      nothing (no rollback, reset or append of that step happens). last_error() MUST contain the word
      "refused" and name what §5.1.4 lists (the sequence, the lowest refusing layer, the oldest key it
      would need, and the smallest reserve that would honour it), e.g. "step.rollbacks[0].n_tokens = 4:
      refused: sequence 0 would keep 13 tokens, but layer 0 no longer holds key 10 (...);
      rollback_reserve >= 6 would honour it (it is 4)". ringkv tells a refusal from another invalid
      step by that word.
    - In an exposed cache (snapshot), the slots of removed tokens are empty afterwards (§5.1.6). */
typedef struct ringkv_rollback {
  uint32_t struct_size;  /**< sizeof(ringkv_rollback) */
  int32_t sequence;      /**< in [0, batch), at most once per batch, not reset in the same batch */
  int64_t n_tokens;      /**< in [1, tokens held before the step] */
} ringkv_rollback;

/** One step over a batch (spec §5, spec 1.1 §5.1): every rollback first (ABI 1.3), then every reset,
    then every append, each append's tokens in order (a token attends to the chunk's earlier tokens and
    to itself). Sequences not named sit out. An invalid step (any of its parts) returns
    RINGKV_ERR_STEP and changes nothing. */
typedef struct ringkv_batch {
  uint32_t struct_size;          /**< sizeof(ringkv_batch) */
  uint32_t num_resets;
  const ringkv_reset* resets;    /**< [num_resets], strided by resets[0].struct_size */
  uint32_t num_appends;
  uint32_t reserved0;            /**< 0 */
  const ringkv_append* appends;  /**< [num_appends], strided by appends[0].struct_size */
  /* ABI 1.3 (read them only if RINGKV_HAS_FIELD(batch, ringkv_batch, rollbacks); a 1.2 host's batch
     ends before them and has no rollbacks). */
  uint32_t num_rollbacks;        /**< 0 unless the engine declared ringkv_capabilities.rollback */
  uint32_t reserved1;            /**< 0 */
  const ringkv_rollback* rollbacks;  /**< [num_rollbacks], strided by rollbacks[0].struct_size */
} ringkv_batch;

/** Element i of batch->resets, honouring the elements' struct_size. */
static inline const ringkv_reset* ringkv_batch_reset(const ringkv_batch* batch, uint32_t i) {
  const size_t stride = batch->resets[0].struct_size, index = i;
  return RINGKV_ABI_PTR(const ringkv_reset*, RINGKV_ABI_PTR(const char*, batch->resets) + stride * index);
}
/** Element i of batch->appends, honouring the elements' struct_size. */
static inline const ringkv_append* ringkv_batch_append(const ringkv_batch* batch, uint32_t i) {
  const size_t stride = batch->appends[0].struct_size, index = i;
  return RINGKV_ABI_PTR(const ringkv_append*, RINGKV_ABI_PTR(const char*, batch->appends) + stride * index);
}
/** Number of rollbacks of the batch: 0 for a batch from a host older than ABI 1.3. */
static inline uint32_t ringkv_batch_num_rollbacks(const ringkv_batch* batch) {
  return RINGKV_HAS_FIELD(batch, ringkv_batch, rollbacks) ? batch->num_rollbacks : 0u;
}
/** Element i of batch->rollbacks (i < ringkv_batch_num_rollbacks(batch)), honouring the elements'
    struct_size. */
static inline const ringkv_rollback* ringkv_batch_rollback(const ringkv_batch* batch, uint32_t i) {
  const size_t stride = batch->rollbacks[0].struct_size, index = i;
  return RINGKV_ABI_PTR(const ringkv_rollback*, RINGKV_ABI_PTR(const char*, batch->rollbacks) + stride * index);
}

/* ------------------------------------------------------------------ snapshot */

/** Which stored rows ringkv wants: KEYED BY TRUE POSITION, not by slot (a paged engine or a
    llama.cpp-style cache has no slot to report). ringkv asks for exactly the positions the spec says
    a (layer, sequence) holds after the last step (spec §3): the sinks and the most recent tokens. */
typedef struct ringkv_snapshot_request {
  uint32_t struct_size;      /**< sizeof(ringkv_snapshot_request) */
  int32_t layer;             /**< in [0, layers); else RINGKV_ERR_STEP */
  int32_t sequence;          /**< in [0, batch); else RINGKV_ERR_STEP */
  uint32_t num_positions;
  const int64_t* positions;  /**< [num_positions] true positions (borrowed for the call) */
} ringkv_snapshot_request;

/** Where the engine writes the stored rows. Every buffer is owned by ringkv, sized by ringkv for
    num_positions rows, and borrowed for the call. Row r answers positions[r]. */
typedef struct ringkv_snapshot_result {
  uint32_t struct_size;  /**< sizeof(ringkv_snapshot_result) */
  /** Set by ringkv: INT8 scales per (row, kv head) of K and V (spec §10.6: head_dim / group for
      per_head and q8_0, 0 for static_tensor and for non-INT8 formats). */
  uint32_t k_scales_per_row;
  uint32_t v_scales_per_row;
  /** Output: nonzero if the engine wrote the INT8 codes and scales below (required for the INT8
      storage checks; leave 0 if it cannot expose them). */
  int32_t codes_written;
  /** Output: [num_positions] 1 if the engine holds that position's K/V for this (layer, sequence),
      0 if not (its rows are then ignored). */
  uint8_t* present;
  /** Output: [num_positions][num_kv_heads][head_dim] the stored K and V decoded to f32 (the rotated,
      rounded or dequantised values the engine attends with, spec §10.6). */
  float* k;
  float* v;
  /** Output, INT8 formats only (NULL otherwise): codes, same shape as k / v. */
  int8_t* k_codes;
  int8_t* v_codes;
  /** Output, INT8 formats with a per-row scale only (NULL otherwise):
      [num_positions][num_kv_heads][k_scales_per_row] the stored (dequantisation) scales as f32. */
  float* k_scales;
  float* v_scales;
  /** Output: if the engine is a ring, the number of rows it keeps for this (layer, sequence) (its slot
      count; the spec says min(S + W, max_tokens)); 0 if it does not say (a paged engine). */
  int64_t capacity_rows;
} ringkv_snapshot_result;

/* ------------------------------------------------------------------ the table */

/** Opaque engine handle, created by create() and released by destroy(). */
typedef struct ringkv_engine ringkv_engine;

/** The function table a plugin returns. Functions marked OPTIONAL may be NULL. Unless said otherwise,
    every function returns RINGKV_OK or an error code, and on error last_error(engine) explains. */
typedef struct ringkv_engine_api {
  /** sizeof(ringkv_engine_api) in the plugin's header version; the host reads only functions that
      lie within it. */
  uint32_t struct_size;
  /** RINGKV_ABI_VERSION the plugin was built with. The host refuses a different major. */
  uint32_t abi_version;

  /** Fills *caps (see ringkv_capabilities). Called before any create(), possibly more than once. */
  ringkv_status (*get_capabilities)(ringkv_capabilities* caps);

  /** Creates an engine from a config: config_json is a UTF-8 JSON document of config_json_size bytes
      (also NUL-terminated), with "config_version": 1; fields and meaning in docs/engine-abi.md and
      conformance/support/config_json.cpp. The engine allocates its whole cache here. On success
      *engine is a new handle. On failure *engine is NULL and a NUL-terminated message (truncated to
      fit) is written to error[0 .. error_size) when error is not NULL; use RINGKV_ERR_CONFIG for
      configs the engine rejects or does not support, naming the field. */
  ringkv_status (*create)(const char* config_json, size_t config_json_size, ringkv_engine** engine,
                          char* error, size_t error_size);

  /** Releases everything of the engine. NULL is a no-op. Never fails. */
  void (*destroy)(ringkv_engine* engine);

  /** The message of the last failed call on this engine ("" if none), NUL-terminated, owned by the
      engine, valid until the next call on this handle or its destruction. Never NULL. */
  const char* (*last_error)(ringkv_engine* engine);

  /** OPTIONAL. Fills *info for this engine (its precision profile for its config, determinism, name).
      NULL or RINGKV_ERR_UNSUPPORTED: ringkv uses the capabilities' values. */
  ringkv_status (*get_info)(ringkv_engine* engine, ringkv_engine_info* info);

  /** Runs one step (ringkv_batch). An invalid batch returns RINGKV_ERR_STEP and changes nothing. */
  ringkv_status (*step)(ringkv_engine* engine, const ringkv_batch* batch);

  /** Same as a step with just this reset and no appends. */
  ringkv_status (*reset)(ringkv_engine* engine, int32_t sequence, int64_t start_position);

  /** OPTIONAL (capabilities.snapshot). Reports the stored K/V of the requested positions of one
      (layer, sequence), for the exact checks of spec §11. RINGKV_ERR_UNSUPPORTED if not available. */
  ringkv_status (*snapshot)(ringkv_engine* engine, const ringkv_snapshot_request* request,
                            ringkv_snapshot_result* result);

  /** Bytes the engine's KV cache holds, all layers and sequences (must not grow with tokens: the
      constant-memory property checks it). */
  ringkv_status (*cache_bytes)(ringkv_engine* engine, uint64_t* bytes);

  /** OPTIONAL test hook. Overwrites the stored K/V (and scales) of every EMPTY slot or page with NaN,
      so that attending to one shows in the outputs (the poisoning property). RINGKV_ERR_UNSUPPORTED or
      NULL: that property reports the engine as unsupported. */
  ringkv_status (*poison_empty_slots)(ringkv_engine* engine);
} ringkv_engine_api;

/** The plugin's one exported symbol. host_abi_major is the host's RINGKV_ABI_VERSION_MAJOR; a plugin
    that implements several majors returns the matching table, otherwise its own (the host then reports
    the mismatch) or NULL. Must be cheap and must not start threads or touch a device. */
typedef const ringkv_engine_api* (*ringkv_engine_api_get_fn)(uint32_t host_abi_major);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* RINGKV_ENGINE_ABI_H */
