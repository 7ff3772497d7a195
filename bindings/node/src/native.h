/*
 * Native functions (native.c): the C functions a pool runs, looked up by
 * name in a shared library (nativeFunction) or built in (kernels.noop),
 * each behind a tagged JS handle that owns its native_fn.
 */
#ifndef BLITZ_NODE_NATIVE_H
#define BLITZ_NODE_NATIVE_H

#include "args.h"

/* A native function: a blz_fn (kind 0) or a blz_range_fn (kind 1). Freed
 * by its handle's finalizer; a call copies the pointer it needs. */
typedef struct native_fn {
    int kind;
    union { blz_fn task; blz_range_fn range; } fn;
} native_fn;

/* The native_fn behind a NativeFunction handle, or NULL with a TypeError pending. */
native_fn *unwrap_fn(napi_env env, napi_value handle);

/* loadFunction(path, symbol, kind) and builtinFunction(name) -> fn handle. */
extern const js_export native_exports[];

#endif
