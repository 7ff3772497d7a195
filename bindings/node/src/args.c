/*
 * Argument access (args.h): Node-API failures and statuses as JS errors,
 * byte arguments and the memory a call's kernels use, tagged handles and
 * indices. Loop thread only: everything here makes Node-API calls. The
 * lifetime rule it keeps: a kernel never gets memory JavaScript can take
 * away (take_bytes hands out a copy the call owns, or a SharedArrayBuffer's
 * bytes held by a reference); the call_memory's owner (a call, freed in
 * lifetime.c after its on_done; a uvCrc32 batch) frees it with memory_free.
 */
#include "args.h"

#include <math.h>
#include <sys/mman.h>

void throw_napi_failure(napi_env env, napi_status status, const char *what) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) return;
    const napi_extended_error_info *info = NULL;
    napi_get_last_error_info(env, &info);
    char message[256];
    snprintf(message, sizeof message, "libblitz: Node-API call failed (%d: %s): %s", (int)status,
             info && info->error_message ? info->error_message : "unknown", what);
    napi_throw_error(env, "ERR_BLITZ_NAPI", message);
}

/* A status's name, as a JS string: blz_status_string's text before its
 * colon ("BLZ_EINVAL"), so that a status the library adds is named without
 * a change here; "BLZ_EUNKNOWN" for a code the library does not know. */
napi_status status_name(napi_env env, blz_status s, napi_value *out) {
    const char *text = blz_status_string(s);
    const char *colon = strchr(text, ':');
    if (strncmp(text, "BLZ_", 4) != 0 || !colon) return napi_create_string_utf8(env, "BLZ_EUNKNOWN", NAPI_AUTO_LENGTH, out);
    return napi_create_string_utf8(env, text, (size_t)(colon - text), out);
}

/* An Error with .code = the status name and .status = the number. */
napi_value status_error(napi_env env, blz_status s) {
    napi_value code, message, error, number;
    if (status_name(env, s, &code) != napi_ok ||
        napi_create_string_utf8(env, blz_status_string(s), NAPI_AUTO_LENGTH, &message) != napi_ok ||
        napi_create_error(env, code, message, &error) != napi_ok)
        return NULL;
    if (napi_create_int32(env, s, &number) == napi_ok) napi_set_named_property(env, error, "status", number);
    return error;
}

void throw_status(napi_env env, blz_status s) {
    napi_value error = status_error(env, s);
    if (error) napi_throw(env, error);
}

bool is_undefined_or_null(napi_env env, napi_value v) {
    napi_valuetype t;
    return napi_typeof(env, v, &t) != napi_ok || t == napi_undefined || t == napi_null;
}

/* ---- byte arguments ---- */

static size_t element_size(napi_typedarray_type type) {
    switch (type) {
    case napi_int16_array: case napi_uint16_array: return 2;
    case napi_int32_array: case napi_uint32_array: case napi_float32_array: return 4;
    case napi_float64_array: case napi_bigint64_array: case napi_biguint64_array: return 8;
    default: return 1;
    }
}

/* false, with nothing pending, if v is none of those. */
bool read_js_bytes(napi_env env, napi_value v, js_bytes *b) {
    bool is = false;
    void *data = NULL;
    b->type = -1;
    b->count = 0;
    if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
        napi_typedarray_type type;
        if (napi_get_typedarray_info(env, v, &type, &b->count, &data, &b->buffer, NULL) != napi_ok) return false;
        b->type = (int)type;
        b->len = b->count * element_size(type);
    } else if (napi_is_dataview(env, v, &is) == napi_ok && is) {
        if (napi_get_dataview_info(env, v, &b->len, &data, &b->buffer, NULL) != napi_ok) return false;
    } else if (napi_is_arraybuffer(env, v, &is) == napi_ok && is) {
        if (napi_get_arraybuffer_info(env, v, &data, &b->len) != napi_ok) return false;
        b->buffer = v;
    } else {
        return false;
    }
    /* napi_is_arraybuffer is V8's IsArrayBuffer, false for a SharedArrayBuffer:
     * the one test of shared memory Node-API 8 has, made on the real buffer. */
    bool plain = true;
    if (napi_is_arraybuffer(env, b->buffer, &plain) != napi_ok) return false;
    b->shared = !plain;
    b->data = data;
    if (!data) b->len = 0; /* detached */
    return true;
}

/* read_js_bytes, with a TypeError naming `what` pending when v holds no bytes. */
bool get_bytes(napi_env env, napi_value v, js_bytes *b, const char *what) {
    if (read_js_bytes(env, v, b)) return true;
    char message[160];
    snprintf(message, sizeof message, "%s must be a Buffer, TypedArray, DataView or ArrayBuffer", what);
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
    return false;
}

/* A block of a call_memory's copies: chunks are never moved, so a copy
 * stays where take_bytes put it until memory_free. */
struct copy_chunk {
    struct copy_chunk *next;
    size_t used, cap;
    size_t mapped;       /* the mmap'd length, or 0: malloc'd */
    max_align_t bytes[]; /* aligned as malloc's: a copy of a Float64Array is a double[] */
};

enum { COPY_ALIGN = _Alignof(max_align_t), HUGE_PAGE = 2 << 20, LARGEST_CHUNK = 64 << 20 };

/*
 * A chunk of at least cap bytes. From 2 MiB on it is mapped on its own and
 * advised into transparent huge pages: the copy's first touch of fresh
 * memory, not memcpy, is what a large copy costs (one page fault per
 * 4 KiB otherwise; the measurements are in docs/embedding.md). Pages a
 * call never touches cost nothing, so chunks can be generous.
 */
static copy_chunk *chunk_new(size_t cap) {
    size_t bytes = sizeof(copy_chunk) + cap;
    copy_chunk *c;
    if (bytes >= HUGE_PAGE) {
        bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        madvise(p, bytes, MADV_HUGEPAGE); /* advice only: EINVAL without THP changes nothing */
        c = p;
        c->mapped = bytes;
        c->cap = bytes - sizeof(copy_chunk);
    } else {
        c = malloc(bytes);
        if (!c) return NULL;
        c->mapped = 0;
        c->cap = cap;
    }
    c->used = 0;
    c->next = NULL;
    return c;
}

static void chunk_free(copy_chunk *c) {
    if (c->mapped) munmap(c, c->mapped); else free(c);
}

/* len bytes the call owns, or NULL. Chunks double up to 64 MiB, so that
 * many small buffers cost few allocations, and a large one gets its own. */
unsigned char *memory_alloc(call_memory *m, size_t len) {
    if (len > SIZE_MAX / 4) return NULL;
    size_t need = len ? (len + COPY_ALIGN - 1) / COPY_ALIGN * COPY_ALIGN : COPY_ALIGN;
    copy_chunk *head = m->chunks;
    if (!head || head->cap - head->used < need) {
        size_t cap = head ? 2 * head->cap : need;
        if (cap > LARGEST_CHUNK) cap = LARGEST_CHUNK;
        if (cap < need) cap = need;
        copy_chunk *fresh = chunk_new(cap);
        if (!fresh) return NULL;
        fresh->next = head;
        m->chunks = head = fresh;
    }
    unsigned char *p = (unsigned char *)head->bytes + head->used;
    head->used += need;
    return p;
}

/* Frees the copies and lets the SharedArrayBuffers go (loop thread). */
void memory_free(napi_env env, call_memory *m) {
    while (m->chunks) {
        copy_chunk *next = m->chunks->next;
        chunk_free(m->chunks);
        m->chunks = next;
    }
    for (size_t i = 0; i < m->nshared; ++i) napi_delete_reference(env, m->shared[i]);
    free(m->shared);
    m->shared = NULL;
    m->nshared = m->shared_cap = 0;
    m->last_shared = NULL;
}

/* Holds a SharedArrayBuffer until the call is freed; views of one buffer
 * in a row (a list of slices) share one reference. */
static bool memory_hold(napi_env env, call_memory *m, napi_value buffer) {
    bool same = false;
    if (m->last_shared && napi_strict_equals(env, m->last_shared, buffer, &same) == napi_ok && same) return true;
    if (m->nshared == m->shared_cap) {
        size_t cap = m->shared_cap ? 2 * m->shared_cap : 4;
        napi_ref *grown = realloc(m->shared, cap * sizeof *grown);
        if (!grown) return false;
        m->shared = grown;
        m->shared_cap = cap;
    }
    if (napi_create_reference(env, buffer, 1, &m->shared[m->nshared]) != napi_ok) return false;
    m->nshared++;
    m->last_shared = buffer;
    return true;
}

/*
 * The memory the kernel will use for b, which must have been read just
 * now, with no JavaScript run since: b's own bytes if they are a
 * SharedArrayBuffer's, else a copy the call owns (of b's contents when
 * copy_in; an output needs none). false with an exception pending.
 */
bool take_bytes(napi_env env, call_memory *m, const js_bytes *b, bool copy_in, byte_span *out) {
    if (b->shared) {
        if (!memory_hold(env, m, b->buffer)) {
            throw_status(env, BLZ_ENOMEM);
            return false;
        }
        out->data = b->data;
        out->len = b->len;
        return true;
    }
    unsigned char *copy = memory_alloc(m, b->len);
    if (!copy) {
        throw_status(env, BLZ_ENOMEM);
        return false;
    }
    if (copy_in && b->len) memcpy(copy, b->data, b->len);
    out->data = copy;
    out->len = b->len;
    return true;
}

/*
 * Writes a call's copy into what `target` holds now (loop thread: the
 * bytes are read and written with no JavaScript in between). false if
 * target was detached or shrunk below the copy's length meanwhile.
 */
bool write_back(napi_env env, napi_value target, byte_span copy) {
    js_bytes now;
    if (!read_js_bytes(env, target, &now) || now.len < copy.len) return false;
    if (copy.len) memcpy(now.data, copy.data, copy.len);
    return true;
}

/* The rejection of a call whose output memory went away before it settled. */
napi_value detached_error(napi_env env) {
    napi_value code, message, error;
    if (napi_create_string_utf8(env, "ERR_BLITZ_DETACHED", NAPI_AUTO_LENGTH, &code) != napi_ok ||
        napi_create_string_utf8(env,
                                "libblitz: the call's output buffer was detached or shrunk before the call "
                                "settled; its result was not written",
                                NAPI_AUTO_LENGTH, &message) != napi_ok ||
        napi_create_error(env, code, message, &error) != napi_ok)
        return NULL;
    return error;
}

/* ---- handles and numbers ---- */

/* The native object behind a JS handle made with `tag`, or NULL with a
 * TypeError naming what was expected. */
void *unwrap_tagged(napi_env env, napi_value handle, const napi_type_tag *tag, const char *what) {
    bool ok = false;
    napi_valuetype t;
    if (napi_typeof(env, handle, &t) == napi_ok && t == napi_object &&
        napi_check_object_type_tag(env, handle, tag, &ok) == napi_ok && ok) {
        void *native = NULL;
        if (napi_unwrap(env, handle, &native) == napi_ok) return native;
    }
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", what);
    return NULL;
}

/* A non-negative integer that fits a size_t and a double exactly. */
bool get_index(napi_env env, napi_value v, const char *what, size_t *out) {
    double d;
    if (napi_get_value_double(env, v, &d) != napi_ok) {
        char message[128];
        snprintf(message, sizeof message, "%s must be a number", what);
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
        return false;
    }
    if (!(d >= 0) || d > 9007199254740991.0 || d != floor(d)) {
        char message[160];
        snprintf(message, sizeof message, "%s must be an integer from 0 to 2^53 - 1", what);
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", message);
        return false;
    }
    *out = (size_t)d;
    return true;
}

/*
 * The buffers of a crc32 call, into spans: each element of the caller's
 * list is read once (an index getter runs once here, and what it returns
 * is what is used) and its memory taken at once, before the next read can
 * run JavaScript. NULL with an exception pending; m then holds what was
 * taken so far, for the caller to free.
 */
byte_span *read_buffers(napi_env env, napi_value list, call_memory *m, size_t *count) {
    bool is_array = false;
    if (napi_is_array(env, list, &is_array) != napi_ok || !is_array) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "buffers must be an array");
        return NULL;
    }
    uint32_t n;
    if (napi_get_array_length(env, list, &n) != napi_ok) return NULL;
    byte_span *spans = malloc((n ? n : 1) * sizeof *spans);
    if (!spans) {
        throw_status(env, BLZ_ENOMEM);
        return NULL;
    }
    for (uint32_t i = 0; i < n; ++i) {
        napi_value item;
        js_bytes b;
        char what[48];
        snprintf(what, sizeof what, "buffers[%u]", i);
        if (napi_get_element(env, list, i, &item) != napi_ok || !get_bytes(env, item, &b, what) ||
            !take_bytes(env, m, &b, true, &spans[i])) {
            free(spans);
            return NULL;
        }
    }
    *count = n;
    return spans;
}
