/* store._speedups: the extension module itself: its method table (every compiled entry point,
 * each defined in the file of its format: _speedups_crc32.c, _speedups_journal.c,
 * _speedups_load.c, _speedups_pages.c) and its init, which tells the CRC-32 what the CPU has.
 * Reference: store/speedups.py, which loads this module (STORE_NO_SPEEDUPS=1 turns it off) and
 * whose callers fall back to their pure-Python code without it; docs/architecture.md
 * ("Compiled loops") lists each entry with its reference and its test.
 */
#include "_speedups.h"

static PyMethodDef methods[] = {
    {"append_record", (PyCFunction)(void (*)(void))append_record, METH_FASTCALL,
     "append_record(buf, rtype, user_type, flags, file_id, lsn, durable_lsn, id, tx_id, "
     "tx_count, data) -> None: one whole record appended to the bytearray buf."},
    {"append_records_run", (PyCFunction)(void (*)(void))append_records_run, METH_FASTCALL,
     "append_records_run(buf, rtype, flags, file_id, first_lsn, durable_lsn, ids, start, stop, "
     "tx_id) -> None: append_record of each id of ids[start:stop], without a body, in one "
     "call."},
    {"crc32", (PyCFunction)(void (*)(void))py_crc32, METH_FASTCALL,
     "crc32(data, value=0) -> int: zlib.crc32's answer, folded with PCLMULQDQ where the CPU "
     "has it."},
    {"peek_message", (PyCFunction)(void (*)(void))peek_message, METH_FASTCALL,
     "peek_message(data, addresses, header_type, version) -> header or None: "
     "store.messaging.message_records.peek_message, compiled."},
    {"replay_adds", (PyCFunction)(void (*)(void))replay_adds, METH_FASTCALL,
     "replay_adds(records, start, entries, index, info_type, live, updated_only, file_key, "
     "add, update) -> (stop, count, live_bytes): a run of ADD and UPDATE records replayed, "
     "as store.file.reader.replay_file."},
    {"replay_message_run", (PyCFunction)(void (*)(void))replay_message_run, METH_FASTCALL,
     "replay_message_run(records, start, end, messages, queue_entries, orders, addresses, "
     "header_type, version, add_ref, add_message, loaded_type, entry_type, ready) -> (stop, "
     "highest): the messaging load's inline replay of message and ref records, compiled."},
    {"keep_run", (PyCFunction)(void (*)(void))keep_run, METH_FASTCALL,
     "keep_run(messages, queues, kept, memory, loaded_type, stored_type, other) -> None: the "
     "messaging load's keeping of loaded messages, compiled."},
    {"add_entries_run", (PyCFunction)(void (*)(void))add_entries_run, METH_FASTCALL,
     "add_entries_run(entries, by_id, ready, scheduled, now, entry_type, ready_state, "
     "scheduled_state) -> None: MessageQueue.add_entries's loop, compiled."},
    {"replay_rows", (PyCFunction)(void (*)(void))replay_rows, METH_FASTCALL,
     "replay_rows(rows, start, entries, index, info_type, live, updated_only, file_key, add, "
     "update, empty, plain) -> stop: "
     "a run of a database journal's ADD and UPDATE rows replayed, as store.db.journal."},
    {"scan_replay", (PyCFunction)(void (*)(void))scan_replay, METH_FASTCALL,
     "scan_replay(data, file_id, start, floor, pad_unit, entries, index, info_type, live, "
     "updated_only, file_key, add, update, other) -> (end, last_lsn, count, first_lsn, "
     "positives, live_bytes): scan and replay_adds in one pass, as store.file.reader."},
    {"scan_page", (PyCFunction)(void (*)(void))scan_page, METH_FASTCALL,
     "scan_page(data[, binding]) -> (records, offset): a page's valid records up to the first invalid "
     "one, as store.paging.format.scan_page."},
    {"scan_bounds", (PyCFunction)(void (*)(void))scan_bounds, METH_FASTCALL,
     "scan_bounds(data[, binding]) -> (bounds, offset): scan_page's records as (offset, length) pairs of "
     "native int64 in bounds."},
    {"paged_runs_in", (PyCFunction)(void (*)(void))paged_runs_in, METH_FASTCALL,
     "paged_runs_in(data, bounds, version) -> (runs, large) or None: paged_runs over the "
     "records scan_bounds located."},
    {"paged_runs", (PyCFunction)(void (*)(void))paged_runs, METH_FASTCALL,
     "paged_runs(records, version) -> (runs, large) or None: runs of paged messages, as "
     "store.messaging.page_scan.python_paged_runs."},
    {"frame_page_record", (PyCFunction)(void (*)(void))frame_page_record, METH_FASTCALL,
     "frame_page_record(payload[, binding]) -> bytes or None: store.paging.format.encode_record, "
     "compiled."},
    {"paged_record", (PyCFunction)(void (*)(void))paged_record, METH_FASTCALL,
     "paged_record(version, message_id, tx_id, record_type, record, queue_ids) -> bytes or "
     "None: PagedMessage.encode's packed path, compiled."},
    {"read_ahead_run", (PyCFunction)(void (*)(void))read_ahead_run, METH_FASTCALL,
     "read_ahead_run(data, bounds, index, end, qid, visible, acked, held, in_memory, page_no, "
     "want, need, budget, version, paged_type, make_position, found) -> (index, budget, stop): "
     "Pager._read_ahead's walk over one page's records, compiled."},
    {"paged_message", (PyCFunction)(void (*)(void))paged_message, METH_FASTCALL,
     "paged_message(data, start, stop, version, paged_type) -> paged_type or None: "
     "PagedMessage.decode's packed path, compiled."},
    {"new_paged", (PyCFunction)(void (*)(void))new_paged, METH_FASTCALL,
     "new_paged(paged_type, message_id, tx_id, record_type, record, queue_ids) -> paged_type: "
     "PagedMessage(...) without its __init__."},
    {"plain_message", (PyCFunction)(void (*)(void))plain_message, METH_FASTCALL,
     "plain_message(data, message_id, message_type, addresses, version, default_type) -> "
     "message_type or None: a Message without properties, as unpack_message decodes it."},
    {"scan", scan, METH_VARARGS,
     "scan(data, file_id, start, floor, pad_unit) -> (records, end, last_lsn, count): the "
     "records in sequence, as store.file.reader.scan."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "Compiled per-record loops of the file journal (see store.speedups).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
#ifdef HAVE_CLMUL_CODE
    __builtin_cpu_init();
    have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    have_vclmul = have_clmul && __builtin_cpu_supports("vpclmulqdq") &&
                  __builtin_cpu_supports("avx512f");
    const char *no_wide = getenv("STORE_NO_WIDE_CRC");
    if (no_wide != NULL && strcmp(no_wide, "1") == 0) { /* "1", as STORE_NO_SPEEDUPS */
        have_vclmul = 0; /* the 128-bit loop alone: for the tests and the benchmarks */
    }
#endif
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddIntConstant(m, "CLMUL", have_clmul) < 0 ||
                      PyModule_AddIntConstant(m, "WIDE_CLMUL", have_vclmul) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}