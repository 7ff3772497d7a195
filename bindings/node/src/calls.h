/*
 * The calls (calls.c): what each pool method (run, parallelFor, crc32,
 * sort, map) takes from its arguments, what its task does on a worker and
 * what its promise resolves to. The call object itself, and who may touch
 * it when, is lifetime.h's call_ctx.
 */
#ifndef BLITZ_NODE_CALLS_H
#define BLITZ_NODE_CALLS_H

#include "args.h"
#include "kernels.h"

typedef struct call_ctx call_ctx;

enum call_kind { CALL_RUN, CALL_FOR, CALL_CRC32, CALL_SORT, CALL_MAP };

/* What a call's promise resolves to. */
enum result_kind { RESULT_UNDEFINED, RESULT_NULL, RESULT_OBJECT, RESULT_CRCS };

/* A call's kernel and its arguments, by kind: set by the loop thread
 * before the spawn, read by the task. Memory they point to is the call's
 * (call_memory, or malloc'd and freed by call_free_args). */
typedef union call_args {
    struct { blz_fn fn; void *arg; } run;
    struct { blz_range_fn fn; void *arg; size_t begin, end, grain; } loop;
    struct { byte_span *spans; uint32_t *out; size_t n; } crc; /* spans: in mem */
    struct { double *a, *tmp; size_t n; } sort;
    struct { int op, f32; double mul, add; void *in, *out; size_t n, grain; } map; /* in, out: in mem */
} call_args;

/* The task of every call, on a worker: runs its kernel, sets ran and inner. */
void call_task(void *arg);
/* What the settled call's promise resolves to (loop thread), or NULL. */
napi_value call_result(napi_env env, call_ctx *c);
/* Frees what the call's kind allocated beside its call_memory. */
void call_free_args(call_ctx *c);

/* run, parallelFor, crc32, sort, map ((handle, ..., token) -> promise) and crc32Sync. */
extern const js_export calls_exports[];

#endif
