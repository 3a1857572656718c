/* fixture_plugin.c: small plugins in plain C for the loader's error paths (tests/test_plugins.cpp)
 * and for both ABI versions (v1 by default; FIXTURE_V2_* export a v2 table naming a length
 * parameter). Built once per FIXTURE_<MODE> definition (tests/CMakeLists.txt); each error build
 * breaks one rule of include/statebench/plugin_abi.h. Also proves that the ABI header is valid C. */
#include <statebench/plugin_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(FIXTURE_NO_ENTRY)

/* A shared library that is not a statebench plugin at all. */
SB_PLUGIN_EXPORT int fixture_unrelated_function(void) { return 42; }

#elif defined(FIXTURE_ABI_V3)

/* A version this statebench does not know. */
SB_PLUGIN_EXPORT uint32_t statebench_plugin_abi_version(void) { return 3; }

#elif defined(FIXTURE_NO_TABLE)

/* Claims ABI v1 but does not export statebench_plugin_v1. */
SB_PLUGIN_EXPORT uint32_t statebench_plugin_abi_version(void) { return SB_PLUGIN_ABI_VERSION; }

#else

/* A task "size" tokens long over the vocabulary {a, b, c}; the label is the input token. */
typedef struct fixture_instance {
  int64_t size;
} fixture_instance;

static const char* const kTokens[] = {"a", "b", "c"};
static const sb_plugin_split_v1 kSplits[] = {{"train", 0, "training"}, {"val", 1, "held out"}};
static const sb_plugin_param_v1 kParams[] = {{"size", "8", "tokens per example"}};

static void* fixture_create(const char* const* keys, const char* const* values, uint32_t n, char* err,
                            size_t err_size) {
  const char* size = "";
  uint32_t i;
  for (i = 0; i < n; ++i)
    if (strcmp(keys[i], "size") == 0) size = values[i];
#if defined(FIXTURE_CREATE_FAILS)
  snprintf(err, err_size, "fixture refuses to create (size=%s)", size);
  return NULL;
#else
  fixture_instance* instance = (fixture_instance*)malloc(sizeof *instance);
  if (!instance) {
    snprintf(err, err_size, "out of memory");
    return NULL;
  }
  instance->size = atoi(size);
  return instance;
#endif
}

static void fixture_destroy(void* instance) { free(instance); }

static void fixture_describe(const void* instance, sb_plugin_shape_v1* shape) {
  shape->seq_len = ((const fixture_instance*)instance)->size;
  shape->vocab_size = 3;
  shape->token_names = kTokens;
  shape->n_splits = 2;
  shape->splits = kSplits;
  shape->details = NULL;
}

static int32_t fixture_sample(const void* instance, int32_t split, uint64_t key, uint64_t index,
                              uint32_t attempt, int32_t* input_ids, int32_t* labels, uint8_t* score_mask,
                              char* err, size_t err_size) {
  const int64_t T = ((const fixture_instance*)instance)->size;
  uint64_t h = key ^ (index * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)attempt << 32) ^ (uint64_t)split;
  int64_t t;
#if defined(FIXTURE_SAMPLE_FAILS)
  snprintf(err, err_size, "fixture cannot sample example %llu", (unsigned long long)index);
  return 1;
#endif
  for (t = 0; t < T; ++t) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    input_ids[t] = (int32_t)((h >> 33) % 3);
    labels[t] = input_ids[t];
    score_mask[t] = 1;
  }
#if defined(FIXTURE_BAD_TOKEN)
  input_ids[T - 1] = 3; /* one past the vocabulary */
#endif
  (void)err;
  (void)err_size;
  return 0;
}

#if defined(FIXTURE_NULL_NAME)
#define FIXTURE_TASK_NAME NULL
#elif defined(FIXTURE_BAD_TOKEN)
#define FIXTURE_TASK_NAME "fixture_bad_token"
#elif defined(FIXTURE_CREATE_FAILS)
#define FIXTURE_TASK_NAME "fixture_create_fails"
#elif defined(FIXTURE_SAMPLE_FAILS)
#define FIXTURE_TASK_NAME "fixture_sample_fails"
#elif defined(FIXTURE_V2_SIZE) || defined(FIXTURE_V2_BAD_LENGTH)
#define FIXTURE_TASK_NAME "fixture_v2"
#else
#define FIXTURE_TASK_NAME "fixture_ok"
#endif

#if defined(FIXTURE_V2_SIZE) || defined(FIXTURE_V2_BAD_LENGTH)

/* Version 2: the v1 task plus the parameter that sets its length ("size"; a typo in BAD_LENGTH). */
#if defined(FIXTURE_V2_SIZE)
#define FIXTURE_LENGTH_PARAM "size"
#else
#define FIXTURE_LENGTH_PARAM "sise"
#endif
static const sb_plugin_task_v2 kTasks[] = {
    {{FIXTURE_TASK_NAME, "fixture task (ABI v2)", 1, kParams, fixture_create, fixture_destroy, fixture_describe,
      fixture_sample},
     FIXTURE_LENGTH_PARAM},
};
static const sb_plugin_v2 kPlugin = {sizeof kTasks / sizeof kTasks[0], kTasks};

SB_PLUGIN_EXPORT uint32_t statebench_plugin_abi_version(void) { return SB_PLUGIN_ABI_V2; }
SB_PLUGIN_EXPORT const sb_plugin_v2* statebench_plugin_v2(void) { return &kPlugin; }

#else

/* Version 1 (the name SB_PLUGIN_ABI_VERSION still means 1, so v1 sources rebuild unchanged). */
static const sb_plugin_task_v1 kTasks[] = {
    {FIXTURE_TASK_NAME, "fixture task", 1, kParams, fixture_create, fixture_destroy, fixture_describe,
     fixture_sample},
#if defined(FIXTURE_DUPLICATE)
    /* The second task takes the name of a built-in task. */
    {"flipflop", "clashes with the built-in", 1, kParams, fixture_create, fixture_destroy, fixture_describe,
     fixture_sample},
#endif
};
static const sb_plugin_v1 kPlugin = {sizeof kTasks / sizeof kTasks[0], kTasks};

SB_PLUGIN_EXPORT uint32_t statebench_plugin_abi_version(void) { return SB_PLUGIN_ABI_VERSION; }
SB_PLUGIN_EXPORT const sb_plugin_v1* statebench_plugin_v1(void) { return &kPlugin; }

#endif
#endif
