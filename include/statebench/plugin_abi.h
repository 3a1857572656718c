/* statebench/plugin_abi.h: the C ABI between statebench and task plugins (shared libraries).
 * Plain C (C11 or later, or C++11 or later): only fixed-width integers, pointers and function
 * pointers cross the boundary, so a plugin built by another compiler or standard library loads.
 * C++ authors normally use statebench/plugin.hpp, which generates all of this from a task class.
 * ABI versions 1 and 2; their layouts are frozen (see "Versioning" below). Version 2 adds one
 * field per task, length_param: the parameter that sets the sequence length, which evaluation at
 * other lengths (task.eval[].length, `statebench eval --length`) changes. */
#ifndef STATEBENCH_PLUGIN_ABI_H
#define STATEBENCH_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------
 * How statebench loads a plugin
 *   1. dlopen(path, RTLD_NOW | RTLD_LOCAL). The library is never unloaded.
 *   2. dlsym("statebench_plugin_abi_version") and call it. A library without this symbol is not
 *      a statebench plugin. The value says which versioned entry point the plugin offers.
 *   3. For version 2: dlsym("statebench_plugin_v2") and call it once (version 1:
 *      "statebench_plugin_v1"). It returns a pointer to a table (sb_plugin_v2 / sb_plugin_v1)
 *      with static storage duration: it, and every string and array it points to, must stay
 *      valid and unchanged for as long as the library is loaded.
 *   4. Every task in the table is validated and registered under its name; a name already
 *      registered (built-in or another plugin) is an error and nothing from the file is added.
 *      A version-2 task's length_param must be NULL, "" or the name of one of its params.
 *   5. When a user creates a task, statebench checks the given parameters against the task's
 *      declared params (unknown keys are rejected before create() runs), then calls create()
 *      with every declared parameter that has a value (given by the user, else its non-empty
 *      default), in declaration order. It then calls describe() once and copies the shape.
 *   6. Example generation calls sample(); statebench draws candidates with attempt = 0, 1, ...
 *      and keeps the first whose input sequence falls on the split's side of the train/eval
 *      partition, so plugin splits are deterministic and disjoint exactly like built-in ones.
 *      Every value sample() writes is checked (token ids in [0, V), labels in [0, V) or -100,
 *      score mask 0/1 and only on labelled positions); a violation is an error naming the file.
 *   7. destroy() is called once per successful create().
 *   8. Evaluation at another length L (a training config's task.eval[].length, `statebench eval
 *      --length L`) creates a second instance with the task's length parameter set to L (the
 *      other parameters unchanged) and needs the same vocabulary size. The length parameter is
 *      length_param (version 2); a version-1 task has one only if it declares a param named
 *      exactly "length". A task without one has a fixed length: a config or command asking for
 *      another length is refused before anything runs, naming the task.
 *
 * Rules for plugin code
 *   - No C++ exception or longjmp may leave any function of this ABI.
 *   - Errors are reported by a NUL-terminated, one-line message written into the caller's buffer
 *     `err` of `err_size` bytes (statebench passes SB_PLUGIN_ERROR_SIZE bytes; truncate longer
 *     messages), together with the failure return value (NULL or nonzero).
 *   - An instance is immutable after create(): sample() may run concurrently on one instance
 *     from several threads and must be a pure function of its arguments (same bytes on every
 *     run, thread and machine). statebench/rng.hpp gives the counter-based RNG built-ins use:
 *     sb::Rng(key, index, attempt).
 *   - Export only the two entry symbols (build with -fvisibility=hidden and SB_PLUGIN_EXPORT).
 *
 * Versioning
 *   The layouts and signatures below (versions 1 and 2) never change. Any change (a new field,
 *   a new function, a changed meaning) makes a new version N with new _vN type names and a new
 *   entry symbol statebench_plugin_vN; statebench_plugin_abi_version() then returns N. A host
 *   supports the versions whose entry symbols it knows (this one: 1 and 2, so plugins built for
 *   version 1 keep loading) and names the numbers when a plugin's is not among them.
 * ------------------------------------------------------------------------------------------- */

#define SB_PLUGIN_ABI_V1 1u /* a plugin exporting statebench_plugin_v1 returns this */
#define SB_PLUGIN_ABI_V2 2u /* a plugin exporting statebench_plugin_v2 returns this (plugin.hpp does) */
/* The version-1 number under its original name, so that version-1 plugin sources rebuild unchanged. */
#define SB_PLUGIN_ABI_VERSION SB_PLUGIN_ABI_V1
#define SB_PLUGIN_ABI_VERSION_SYMBOL "statebench_plugin_abi_version"
#define SB_PLUGIN_ENTRY_V1_SYMBOL "statebench_plugin_v1"
#define SB_PLUGIN_ENTRY_V2_SYMBOL "statebench_plugin_v2"
#define SB_PLUGIN_ERROR_SIZE 512      /* bytes in the err buffers statebench passes */
#define SB_PLUGIN_IGNORE_LABEL (-100) /* label meaning "no loss at this position" */

#if defined(_WIN32)
#define SB_PLUGIN_EXPORT __declspec(dllexport)
#else
#define SB_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A declared task parameter. Values travel as strings; the plugin parses them. */
typedef struct sb_plugin_param_v1 {
  const char* name;          /* non-empty, unique within the task */
  const char* default_value; /* "" or NULL: no default (not passed to create() unless given) */
  const char* help;          /* one line, may be NULL */
} sb_plugin_param_v1;

/* A named example stream of a task instance. */
typedef struct sb_plugin_split_v1 {
  const char* name; /* non-empty, unique within the instance, e.g. "train" */
  int32_t is_eval;  /* 0: training split; nonzero: evaluation split (disjoint from training) */
  const char* help; /* one line, may be NULL */
} sb_plugin_split_v1;

/* What a created instance looks like; filled by describe(). Pointers stay valid until destroy(). */
typedef struct sb_plugin_shape_v1 {
  int64_t seq_len;                 /* T >= 1: tokens per example */
  int64_t vocab_size;              /* V >= 1: inputs and labels both index this vocabulary */
  const char* const* token_names;  /* [V] non-NULL names; token id i is token_names[i] */
  uint32_t n_splits;               /* >= 1 */
  const sb_plugin_split_v1* splits; /* [n_splits] */
  const char* details;             /* extra text for `statebench tasks show`, may be NULL */
} sb_plugin_shape_v1;

/* One task a plugin provides. */
typedef struct sb_plugin_task_v1 {
  const char* name;    /* non-empty, no whitespace; the registry name, e.g. "modular_counter" */
  const char* summary; /* one line for `statebench tasks`, may be NULL */
  uint32_t n_params;
  const sb_plugin_param_v1* params; /* [n_params], may be NULL when n_params == 0 */

  /* Creates an instance from n parameter values (keys[i] = values[i]). Returns an opaque
   * non-NULL instance, or NULL after writing the reason (e.g. "parameter 'modulus'='1': must be
   * in [2, 1000]") into err. */
  void* (*create)(const char* const* keys,   /* [n] declared parameter names */
                  const char* const* values, /* [n] their values */
                  uint32_t n, char* err, size_t err_size);
  /* Frees an instance returned by create(). */
  void (*destroy)(void* instance);
  /* Fills *shape for this instance. Cannot fail. */
  void (*describe)(const void* instance, sb_plugin_shape_v1* shape);
  /* Writes candidate `attempt` of example `index` of the stream `key` (a 64-bit value statebench
   * derives from seed, task name and split name) for split `split` in [0, n_splits). All T
   * entries of the three arrays must be written. Returns 0, or nonzero after writing the reason
   * into err. Must be deterministic and thread-safe (see the rules above). */
  int32_t (*sample)(const void* instance, int32_t split, uint64_t key, uint64_t index,
                    uint32_t attempt,
                    int32_t* input_ids, /* [T] token ids in [0, V) */
                    int32_t* labels,    /* [T] ids in [0, V) or SB_PLUGIN_IGNORE_LABEL */
                    uint8_t* score_mask, /* [T] 1 where accuracy is reported (labelled), else 0 */
                    char* err, size_t err_size);
} sb_plugin_task_v1;

/* The table statebench_plugin_v1() returns. */
typedef struct sb_plugin_v1 {
  uint32_t n_tasks; /* >= 1 */
  const sb_plugin_task_v1* tasks; /* [n_tasks] */
} sb_plugin_v1;

/* ---- version 2: a version-1 task plus the parameter that sets its sequence length ---------- */

/* One task a version-2 plugin provides. */
typedef struct sb_plugin_task_v2 {
  sb_plugin_task_v1 task;   /* everything a version-1 task has, with the same meaning */
  const char* length_param; /* the param whose value sets seq_len (e.g. "length"; it must be one
                             * of task.params); NULL or "": a fixed length (no evaluation at
                             * other lengths) */
} sb_plugin_task_v2;

/* The table statebench_plugin_v2() returns. */
typedef struct sb_plugin_v2 {
  uint32_t n_tasks; /* >= 1 */
  const sb_plugin_task_v2* tasks; /* [n_tasks] */
} sb_plugin_v2;

/* The symbols a plugin exports: statebench_plugin_abi_version() and the entry point of the version
 * it returns (declared here so both sides agree on them). */
SB_PLUGIN_EXPORT uint32_t statebench_plugin_abi_version(void);
SB_PLUGIN_EXPORT const sb_plugin_v1* statebench_plugin_v1(void);
SB_PLUGIN_EXPORT const sb_plugin_v2* statebench_plugin_v2(void);

typedef uint32_t (*sb_plugin_abi_version_fn)(void);
typedef const sb_plugin_v1* (*sb_plugin_entry_v1_fn)(void);
typedef const sb_plugin_v2* (*sb_plugin_entry_v2_fn)(void);

#ifdef __cplusplus
}
#endif

/* The frozen v1 and v2 layouts on 64-bit targets (LP64 / LLP64): a build that changes them fails here. */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
#ifdef __cplusplus
#define SB_PLUGIN_LAYOUT_CHECK(cond) static_assert(cond, "plugin ABI layout changed")
#else
#define SB_PLUGIN_LAYOUT_CHECK(cond) _Static_assert(cond, "plugin ABI layout changed")
#endif
SB_PLUGIN_LAYOUT_CHECK(sizeof(sb_plugin_param_v1) == 24);
SB_PLUGIN_LAYOUT_CHECK(sizeof(sb_plugin_split_v1) == 24 && offsetof(sb_plugin_split_v1, help) == 16);
SB_PLUGIN_LAYOUT_CHECK(sizeof(sb_plugin_shape_v1) == 48 && offsetof(sb_plugin_shape_v1, splits) == 32);
SB_PLUGIN_LAYOUT_CHECK(sizeof(sb_plugin_task_v1) == 64 && offsetof(sb_plugin_task_v1, create) == 32 &&
                       offsetof(sb_plugin_task_v1, sample) == 56);
SB_PLUGIN_LAYOUT_CHECK(sizeof(sb_plugin_v1) == 16 && offsetof(sb_plugin_v1, tasks) == 8);
SB_PLUGIN_LAYOUT_CHECK(sizeof(sb_plugin_task_v2) == 72 && offsetof(sb_plugin_task_v2, length_param) == 64);
SB_PLUGIN_LAYOUT_CHECK(sizeof(sb_plugin_v2) == 16 && offsetof(sb_plugin_v2, tasks) == 8);
#undef SB_PLUGIN_LAYOUT_CHECK
#endif

#endif /* STATEBENCH_PLUGIN_ABI_H */
