/*
 * The Node addon's argument access (args.c): Node-API failures and
 * statuses as JS errors, byte arguments, the memory a call's kernels use,
 * tagged handles and indices. It knows nothing of pools or calls, so the
 * benchmark's libuv module (bench/uv_crc32.c) uses it too. Loop thread
 * only, except the memory it hands out, which a worker then reads and
 * writes as the owner of that memory (a call, lifetime.h) allows.
 */
#ifndef BLITZ_NODE_ARGS_H
#define BLITZ_NODE_ARGS_H

#define _GNU_SOURCE
#define NAPI_VERSION 8

#include <blitz.h>
#include <node_api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returns NULL from the calling napi_callback with a JS exception pending. */
#define CHECK_NAPI(env, call)                                                                 \
    do {                                                                                      \
        napi_status check_status_ = (call);                                                   \
        if (check_status_ != napi_ok) {                                                       \
            throw_napi_failure((env), check_status_, #call);                                  \
            return NULL;                                                                      \
        }                                                                                     \
    } while (0)

#define GET_ARGS(n)                                                                           \
    size_t argc = (n);                                                                        \
    napi_value argv[(n) > 0 ? (n) : 1];                                                       \
    CHECK_NAPI(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));                    \
    if (argc < (n)) {                                                                         \
        napi_throw_type_error(env, "ERR_MISSING_ARGS", "missing arguments");                  \
        return NULL;                                                                          \
    }

/* A function the module exports under `name`: each file that has some
 * lists them in a table ending with {NULL, NULL}, which addon.c registers. */
typedef struct js_export {
    const char *name;
    napi_callback cb;
} js_export;

/* ---- errors ---- */

/* An ERR_BLITZ_NAPI Error naming `what`, unless an exception is pending. */
void throw_napi_failure(napi_env env, napi_status status, const char *what);
napi_status status_name(napi_env env, blz_status s, napi_value *out);
/* An Error with .code = the status name and .status = the number, or NULL. */
napi_value status_error(napi_env env, blz_status s);
void throw_status(napi_env env, blz_status s);
/* The rejection of a call whose output memory went away before it settled. */
napi_value detached_error(napi_env env);

/* ---- byte arguments ---- */

/*
 * A byte argument as the value itself says (never a JS property, which a
 * program can shadow): a TypedArray (Buffer included), DataView or
 * ArrayBuffer, its data pointer (advanced by the view's offset), its
 * length in bytes, and whether its memory is a SharedArrayBuffer's. True
 * only until JavaScript runs again, which may detach, transfer or shrink it.
 */
typedef struct js_bytes {
    unsigned char *data;
    size_t len;
    napi_value buffer; /* the ArrayBuffer or SharedArrayBuffer behind it */
    bool shared;       /* a SharedArrayBuffer: never detached, never shrunk */
    int type;          /* its napi_typedarray_type, or -1: a DataView or ArrayBuffer */
    size_t count;      /* a TypedArray's elements */
} js_bytes;

typedef struct byte_span {
    unsigned char *data;
    size_t len;
} byte_span;

/*
 * The memory a call's kernels use, chosen once per argument on the loop
 * thread, right after the argument was read (take_bytes). JavaScript can
 * detach an ArrayBuffer (transfer it: its new owner may free the memory
 * at once) or shrink a resizable one whenever it runs, and Node-API can
 * prevent neither, so a kernel never gets such memory: it gets a copy that
 * the call owns, written back on the loop thread when the call is settled,
 * into what the argument holds then (write_back). A SharedArrayBuffer is
 * never detached and never shrinks (a growable one grows in place), so
 * its bytes are used in place, zero-copy: a reference to the buffer keeps
 * them alive until the call is freed.
 */
typedef struct copy_chunk copy_chunk; /* args.c */

typedef struct call_memory {
    copy_chunk *chunks;     /* the copies: never moved, freed with the call */
    napi_ref *shared;       /* the SharedArrayBuffers used in place */
    size_t nshared, shared_cap;
    napi_value last_shared; /* the last one held; compared only within the napi callback that takes the bytes */
} call_memory;

bool is_undefined_or_null(napi_env env, napi_value v);
/* v's bytes into b; false, with nothing pending, if v holds none. */
bool read_js_bytes(napi_env env, napi_value v, js_bytes *b);
/* read_js_bytes, with a TypeError naming `what` pending when v holds no bytes. */
bool get_bytes(napi_env env, napi_value v, js_bytes *b, const char *what);
/* len bytes that m owns until memory_free, or NULL. */
unsigned char *memory_alloc(call_memory *m, size_t len);
/* Frees the copies and lets the SharedArrayBuffers go (loop thread). */
void memory_free(napi_env env, call_memory *m);
/* The memory a kernel will use for b, read with no JavaScript run since
 * (see args.c). false with an exception pending. */
bool take_bytes(napi_env env, call_memory *m, const js_bytes *b, bool copy_in, byte_span *out);
/* Writes a copy into what target holds now; false if it lost the room. */
bool write_back(napi_env env, napi_value target, byte_span copy);
/* A crc32 list's buffers, each read once and taken into m at once; NULL
 * with an exception pending (m then holds what was taken, to free). */
byte_span *read_buffers(napi_env env, napi_value list, call_memory *m, size_t *count);

/* ---- handles and numbers ---- */

/* The native object behind a JS handle made with `tag`, or NULL with a
 * TypeError saying `what` was expected. */
void *unwrap_tagged(napi_env env, napi_value handle, const napi_type_tag *tag, const char *what);
/* A non-negative integer that fits a size_t and a double exactly. */
bool get_index(napi_env env, napi_value v, const char *what, size_t *out);

#endif
