/* What the C files of store._speedups share: setup.py builds _speedups_module.c (the method
 * table and the module's init), _speedups_crc32.c (CRC-32), _speedups_slots.c (the slot
 * offsets of a class with __slots__), _speedups_journal.c (the file journal's records),
 * _speedups_load.c (the load's replay and its message records) and _speedups_pages.c (page
 * records and paged messages) into the one extension module store._speedups, which
 * store/speedups.py loads. Each file's opening comment names the Python module that is its
 * reference; the Python code stays the fallback where the module is not built.
 *
 * Here: the helpers more than one of those files calls (the CRC-32, big-endian reads, the
 * __slots__ writes, the argument-count check), the loop state the journal scan and the
 * load's replay share (Sink), and every function one file defines for another: each entry
 * point of the method table, declared here for _speedups_module.c. What one file alone uses
 * stays static in that file. The shared functions are hidden (not exported from the shared
 * object): calls between the files are direct, as calls within one file are. */
#ifndef STORE_SPEEDUPS_H
#define STORE_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h>
#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_CLMUL_CODE 1
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SP_HIDDEN __attribute__((visibility("hidden")))
#else
#define SP_HIDDEN
#endif

/* ---- Arguments ---------------------------------------------------------------------------- */

/* The prologue of an entry point called with a fixed number of arguments: -1 with a TypeError
   of that message set unless nargs is n (paged_runs and crc32 check theirs themselves). */
static inline int check_nargs(Py_ssize_t nargs, Py_ssize_t n, const char *message) {
    if (nargs == n)
        return 0;
    PyErr_SetString(PyExc_TypeError, message);
    return -1;
}

/* ---- CRC-32 (_speedups_crc32.c) ----------------------------------------------------------- */

/* Whether the CPU folds with PCLMULQDQ, and with VPCLMULQDQ on AVX-512 too (set once, by the
   module's init). */
SP_HIDDEN extern int have_clmul;
SP_HIDDEN extern int have_vclmul;

#ifdef HAVE_CLMUL_CODE
/* The CRC register (not inverted: the caller inverts) after folding n bytes, n a multiple of
 * 16 and at least 64. */
SP_HIDDEN uint32_t clmul_fold(const unsigned char *p, Py_ssize_t n, uint32_t reg);
#endif

static inline uLong zlib_crc(uLong crc, const unsigned char *p, Py_ssize_t n) {
    while (n > 0) {
        uInt step = n > (Py_ssize_t)0x40000000 ? 0x40000000u : (uInt)n;
        crc = crc32(crc, p, step);
        p += step;
        n -= step;
    }
    return crc;
}

/* zlib's crc32(crc, p, n), faster where the CPU allows. */
static inline uLong fast_crc(uLong crc, const unsigned char *p, Py_ssize_t n) {
#ifdef HAVE_CLMUL_CODE
    if (have_clmul && n >= 64) {
        Py_ssize_t bulk = n & ~(Py_ssize_t)15;
        crc = ~clmul_fold(p, bulk, ~(uint32_t)crc) & 0xFFFFFFFFUL;
        p += bulk;
        n -= bulk;
    }
#endif
    return zlib_crc(crc, p, n);
}

/* A body this large has its CRC-32 computed with the GIL released. */
#define CRC_NOGIL 65536

/* ---- Big-endian fields (message and page records) ----------------------------------------- */

static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)be32(p) << 32) | (uint64_t)be32(p + 4));
}

/* ---- Objects of classes with __slots__ (_speedups_slots.c) -------------------------------- */

/* A slot of an object of a class with __slots__, by its member offset: borrowed, NULL if unset. */
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* A new instance of a class with __slots__ (no __init__ run), each slot in offsets given the
   matching value (new references taken); NULL with an exception set. */
static inline PyObject *new_slotted(PyTypeObject *type, const Py_ssize_t *offsets,
                                    PyObject **values, int n) {
    PyObject *obj = type->tp_alloc(type, 0);
    if (obj == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        Py_INCREF(values[i]);
        SLOT(obj, offsets[i]) = values[i];
    }
    return obj;
}

/* The slot offsets of the last type asked for with one list of names: the loops are called
   once per run of records, which can be one record long. Holds a reference to the type. */
typedef struct {
    PyTypeObject *type;
    Py_ssize_t at[12];
} SlotCache;

/* The member offsets of names (n of them) in type, into out, through cache (the last type
   asked for); -1 with an exception set unless each is a writable object slot of type. */
SP_HIDDEN int offsets_of_cached(SlotCache *cache, PyTypeObject *type, const char **names,
                                Py_ssize_t *out, int n);

/* ---- The journal scan and the load's replay (_speedups_journal.c, _speedups_load.c) -------- */

/* Where each record in sequence goes: into a list of raw record tuples (scan), or replayed
   (scan_replay: adds and updates into a Replayer and a LiveIndex, any other record as a raw
   tuple handed to a Python callable). */
typedef struct {
    PyObject *out;                      /* scan: the list of raw records */
    PyObject *entries, *index;          /* scan_replay: the Replayer's containers */
    PyTypeObject *info_type;            /* RecordInfo */
    PyObject *live, *updated_only;      /* the LiveIndex's, live None: no index */
    PyObject *other;                    /* callable(raw record) for every other record */
    unsigned long long file_key;
    long add, update;
    long long positives;                /* adds and updates replayed */
    unsigned long long live_bytes;      /* their lengths, summed */
} Sink;

/* The records in sequence of data[start:], each given to the sink (_speedups_journal.c). */
SP_HIDDEN int scan_loop(const unsigned char *data, Py_ssize_t size, unsigned long long file_id,
                        Py_ssize_t start, int floor, Py_ssize_t pad_unit, Sink *sink,
                        Py_ssize_t *end, uint64_t *last_lsn_out, long long *count_out,
                        uint64_t *first_lsn);

/* Replayer.add or Replayer.update of one positive record, and the LiveIndex's rules for it
   (_speedups_load.c). */
SP_HIDDEN int replay_positive(Sink *s, PyObject *rid, PyObject *urt, PyObject *body,
                              int is_update, unsigned long long length);

/* ---- The entry points (the method table of _speedups_module.c) ---------------------------- */

#define SP_ENTRY(name) SP_HIDDEN PyObject *name(PyObject *self, PyObject *const *args, \
                                                Py_ssize_t nargs)

/* _speedups_crc32.c */
SP_ENTRY(py_crc32);

/* _speedups_journal.c */
SP_HIDDEN PyObject *scan(PyObject *self, PyObject *args);
SP_ENTRY(append_record);
SP_ENTRY(append_records_run);

/* _speedups_load.c */
SP_ENTRY(replay_adds);
SP_ENTRY(replay_rows);
SP_ENTRY(scan_replay);
SP_ENTRY(peek_message);
SP_ENTRY(replay_message_run);
SP_ENTRY(keep_run);
SP_ENTRY(add_entries_run);
SP_ENTRY(plain_message);

/* _speedups_pages.c */
SP_ENTRY(scan_page);
SP_ENTRY(scan_bounds);
SP_ENTRY(paged_runs);
SP_ENTRY(paged_runs_in);
SP_ENTRY(paged_message);
SP_ENTRY(new_paged);
SP_ENTRY(frame_page_record);
SP_ENTRY(paged_record);
SP_ENTRY(read_ahead_run);

#undef SP_ENTRY

#endif /* STORE_SPEEDUPS_H */
