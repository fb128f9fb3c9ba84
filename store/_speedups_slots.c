/* store._speedups: the member offsets of a class's __slots__, for the loops that make or fill
 * objects of such classes directly (_speedups_load.c: LoadedMessage, QueueEntry,
 * StoredMessage; _speedups_pages.c: PagedMessage), without running their __init__. No Python
 * reference of its own: each caller's tests compare the objects made with the reference's
 * (store.messaging.recovery, store.messaging.loader, store.messaging.message_records).
 */
#include "_speedups.h"

/* The member offsets of names (a tuple of str) in type, into out (n of them); -1 with an
   exception set unless each is a __slots__ member of type. */
static int slot_offsets(PyTypeObject *type, PyObject *names, Py_ssize_t *out, int n) {
    if (!PyTuple_Check(names) || PyTuple_GET_SIZE(names) != n) {
        PyErr_Format(PyExc_TypeError, "expected a tuple of %d slot names", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *d = PyDict_GetItemWithError(type->tp_dict, PyTuple_GET_ITEM(names, i));
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%R is not a slot of %s",
                             PyTuple_GET_ITEM(names, i), type->tp_name);
            return -1;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)) {
            PyErr_Format(PyExc_TypeError, "%R is not a writable object slot",
                         PyTuple_GET_ITEM(names, i));
            return -1;
        }
        out[i] = m->offset;
    }
    return 0;
}

static int offsets_uncached(PyTypeObject *type, const char **names, Py_ssize_t *out, int n);

int offsets_of_cached(SlotCache *cache, PyTypeObject *type, const char **names, Py_ssize_t *out,
                      int n) {
    if (cache->type != type) {
        if (offsets_uncached(type, names, cache->at, n) < 0)
            return -1;
        Py_INCREF(type);
        Py_XSETREF(cache->type, type);
    }
    memcpy(out, cache->at, (size_t)n * sizeof(Py_ssize_t));
    return 0;
}

static int offsets_uncached(PyTypeObject *type, const char **names, Py_ssize_t *out, int n) {
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        PyObject *name = PyUnicode_InternFromString(names[i]);
        if (name == NULL) {
            Py_DECREF(t);
            return -1;
        }
        PyTuple_SET_ITEM(t, i, name);
    }
    int rc = slot_offsets(type, t, out, n);
    Py_DECREF(t);
    return rc;
}
