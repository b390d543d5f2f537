/* The analysis's hot path below Python: one entry's bytes -> the few facts `analyze` needs.
 *
 * scan(data, pending_ack) returns (batched, records, op_counts, txn_hashes) or None.
 * - op_counts: [(op column, count), ...], the columns of facts.OPS;
 * - txn_hashes: the distinct hash((most, least)) of the entry's transaction ids, equal to
 *   CPython's own tuple hash (facts.txn_hash), so both paths feed the same distinct counters.
 *
 * The scanner is strict on purpose: it accepts only entries that the protobuf decoder accepts
 * with the same meaning (known fields, expected wire types, enum values in range, required
 * fields present, lengths in bounds). On anything else it returns None and the caller runs the
 * full decoder, which also writes the error messages. So the fast path never changes a result:
 * tests/pipeline/test_scan.py compares both on generated, mutated and hostile entries.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../_wire.h"

/* Op columns as facts.OPS numbers them: TC ops 0..7, then the pending-ack ops 8..10. */
enum { UPDATE = 3, TC_STATUSES = 5, PA_BASE = 8, COLUMNS = 11 };

static int skip_delimited(ptr *p, ptr end)
{
    ptr b, e;
    return delimited(p, end, &b, &e);
}

/* Subscription { required string topic = 1; required string subscription = 2; } */
static int subscription(ptr p, ptr end)
{
    int seen = 0;
    uint32_t number, wire;
    while (p < end) {
        if (!tag(&p, end, &number, &wire) || wire != LEN || number > 2 || !skip_delimited(&p, end))
            return 0;
        seen |= 1 << number;
    }
    return seen == 6;
}

/* PendingAckMetadata { required uint64 ledgerId = 1; required uint64 entryId = 2;
 *                      repeated int64 ack_set = 3; optional int32 batch_size = 4; } */
static int pending_ack_position(ptr p, ptr end)
{
    int seen = 0;
    uint32_t number, wire;
    uint64_t value;
    while (p < end) {
        if (!tag(&p, end, &number, &wire) || number > 4)
            return 0;
        if (number == 3 && wire == LEN) { /* packed ack_set: whole varints only */
            ptr b, e;
            if (!delimited(&p, end, &b, &e))
                return 0;
            while (b < e)
                if (!varint(&b, e, &value))
                    return 0;
            continue;
        }
        if (wire != VARINT || !varint(&p, end, &value))
            return 0;
        seen |= 1 << number;
    }
    return (seen & 6) == 6;
}

/* One TransactionMetadataEntry: its op column (facts.TC_OPS) and transaction id. */
static int tc_record(ptr p, ptr end, int *column, uint64_t *most, uint64_t *least)
{
    uint64_t op = 0, status = 0, value; /* proto2 defaults: NEW, OPEN */
    uint32_t number, wire;
    *most = *least = 0;
    while (p < end) {
        if (!tag(&p, end, &number, &wire))
            return 0;
        switch (number) {
        case 6: case 12: /* partitions, owner */
            if (wire != LEN || !skip_delimited(&p, end))
                return 0;
            break;
        case 7: { /* subscriptions */
            ptr b, e;
            if (wire != LEN || !delimited(&p, end, &b, &e) || !subscription(b, e))
                return 0;
            break;
        }
        case 1: case 2: case 3: case 4: case 5: case 8: case 9: case 10: case 11:
            if (wire != VARINT || !varint(&p, end, &value))
                return 0;
            if (number == 1) {
                if (value > UPDATE)
                    return 0; /* an unknown enum value: the decoder keeps it aside */
                op = value;
            } else if (number == 4 || number == 5) {
                if (value >= TC_STATUSES)
                    return 0;
                if (number == 5)
                    status = value;
            } else if (number == 2) {
                *least = value;
            } else if (number == 3) {
                *most = value;
            }
            break;
        default:
            return 0;
        }
    }
    *column = (int)(op == UPDATE ? UPDATE + status : op);
    return 1;
}

/* One PendingAckMetadataEntry: its op column (facts.PENDING_ACK_OPS) and transaction id. */
static int pa_record(ptr p, ptr end, int *column, uint64_t *most, uint64_t *least)
{
    uint64_t op = 1, value; /* proto2 default: ACK */
    uint32_t number, wire;
    *most = *least = 0;
    while (p < end) {
        if (!tag(&p, end, &number, &wire))
            return 0;
        if (number == 5) {
            ptr b, e;
            if (wire != LEN || !delimited(&p, end, &b, &e) || !pending_ack_position(b, e))
                return 0;
            continue;
        }
        if (number > 4 || wire != VARINT || !varint(&p, end, &value))
            return 0;
        if (number == 1) {
            if (value < 1 || value > 3)
                return 0;
            op = value;
        } else if (number == 2) {
            if (value > 1)
                return 0;
        } else if (number == 3) {
            *least = value;
        } else {
            *most = value;
        }
    }
    *column = PA_BASE + (int)op - 1;
    return 1;
}

/* CPython's hash((most, least)) for two non-negative ints (tuple hash over int hashes), so
 * the values equal facts.txn_hash; the module's import checks this against the interpreter. */
#define XXPRIME_1 11400714785074694791ULL
#define XXPRIME_2 14029467366897019727ULL
#define XXPRIME_5 2870177450012600261ULL
#define MODULUS ((1ULL << 61) - 1)

static uint64_t tuple_lane(uint64_t acc, uint64_t value)
{
    acc += (value % MODULUS) * XXPRIME_2;
    acc = (acc << 31) | (acc >> 33);
    return acc * XXPRIME_1;
}

static int64_t txn_hash(uint64_t most, uint64_t least)
{
    uint64_t acc = tuple_lane(tuple_lane(XXPRIME_5, most), least);
    acc += 2 ^ (XXPRIME_5 ^ 3527539ULL);
    return acc == (uint64_t)-1 ? 1546275796 : (int64_t)acc;
}

/* The distinct hashes of one entry: open addressing over a power-of-two table. */
typedef struct {
    int64_t *slots;
    uint8_t *used;
    size_t mask, count;
    int64_t *order; /* insertion order, for the result list */
} hash_set;

static int set_init(hash_set *s, size_t expected)
{
    size_t size = 16;
    while (size < 2 * expected)
        size <<= 1;
    s->slots = PyMem_Malloc(size * sizeof(int64_t));
    s->used = PyMem_Calloc(size, 1);
    s->order = PyMem_Malloc(expected * sizeof(int64_t));
    s->mask = size - 1;
    s->count = 0;
    return s->slots && s->used && s->order;
}

static void set_free(hash_set *s)
{
    PyMem_Free(s->slots);
    PyMem_Free(s->used);
    PyMem_Free(s->order);
}

static void set_add(hash_set *s, int64_t h)
{
    size_t i = ((uint64_t)h * XXPRIME_1 >> 20) & s->mask;
    while (s->used[i]) {
        if (s->slots[i] == h)
            return;
        i = (i + 1) & s->mask;
    }
    s->used[i] = 1;
    s->slots[i] = h;
    s->order[s->count++] = h;
}

typedef int (*record_fn)(ptr, ptr, int *, uint64_t *, uint64_t *);

/* How many records a batched container holds (field 1, length-delimited, and nothing else);
 * -1 when it holds anything else. */
static Py_ssize_t count_records(ptr p, ptr end)
{
    Py_ssize_t n = 0;
    uint32_t number, wire;
    while (p < end) {
        if (!tag(&p, end, &number, &wire) || number != 1 || wire != LEN || !skip_delimited(&p, end))
            return -1;
        n++;
    }
    return n;
}

static PyObject *facts(int batched, Py_ssize_t records, const Py_ssize_t *counts, hash_set *hashes)
{
    PyObject *ops = NULL, *list = NULL;
    int nonzero = 0;
    for (int i = 0; i < COLUMNS; i++)
        nonzero += counts[i] != 0;
    if (!(ops = PyList_New(nonzero)) || !(list = PyList_New((Py_ssize_t)hashes->count)))
        goto fail;
    for (int i = 0, k = 0; i < COLUMNS; i++) {
        if (!counts[i])
            continue;
        PyObject *pair = Py_BuildValue("(in)", i, counts[i]);
        if (!pair)
            goto fail;
        PyList_SET_ITEM(ops, k++, pair);
    }
    for (size_t i = 0; i < hashes->count; i++) {
        PyObject *h = PyLong_FromLongLong(hashes->order[i]);
        if (!h)
            goto fail;
        PyList_SET_ITEM(list, (Py_ssize_t)i, h);
    }
    return Py_BuildValue("(OnNN)", batched ? Py_True : Py_False, records, ops, list);
fail:
    Py_XDECREF(ops);
    Py_XDECREF(list);
    return NULL;
}

static PyObject *scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "scan(data, pending_ack) takes two arguments");
        return NULL;
    }
    if (!PyBytes_Check(args[0]))
        Py_RETURN_NONE;
    int pending_ack = PyObject_IsTrue(args[1]);
    if (pending_ack < 0)
        return NULL;
    ptr data = (ptr)PyBytes_AS_STRING(args[0]);
    ptr end = data + PyBytes_GET_SIZE(args[0]);
    if (data == end)
        Py_RETURN_NONE;
    record_fn record = pending_ack ? pa_record : tc_record;
    Py_ssize_t counts[COLUMNS] = {0};
    int column;
    uint64_t most, least;

    if (data[0] != 0x0E) { /* one record, unbatched */
        if (!record(data, end, &column, &most, &least))
            Py_RETURN_NONE;
        counts[column] = 1;
        int64_t h = txn_hash(most, least);
        hash_set one = {.order = &h, .count = 1};
        return facts(0, 1, counts, &one);
    }
    if (end - data < 4 || data[1] != 0x01)
        Py_RETURN_NONE;
    ptr body = data + 4;
    Py_ssize_t records = count_records(body, end);
    if (records < 0)
        Py_RETURN_NONE;
    hash_set hashes;
    if (!set_init(&hashes, (size_t)records + 1)) {
        set_free(&hashes);
        return PyErr_NoMemory();
    }
    uint32_t number, wire;
    for (ptr p = body; p < end;) {
        ptr b, e;
        tag(&p, end, &number, &wire); /* checked by count_records */
        delimited(&p, end, &b, &e);
        if (!record(b, e, &column, &most, &least)) {
            set_free(&hashes);
            Py_RETURN_NONE;
        }
        counts[column]++;
        set_add(&hashes, txn_hash(most, least));
    }
    PyObject *out = facts(1, records, counts, &hashes);
    set_free(&hashes);
    return out;
}

static PyObject *py_txn_hash(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    unsigned long long most, least;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "txn_hash(most, least) takes two arguments");
    most = PyLong_AsUnsignedLongLong(args[0]);
    least = PyLong_AsUnsignedLongLong(args[1]);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromLongLong(txn_hash(most, least));
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(data, pending_ack) -> (batched, records, op_counts, txn_hashes), or None for the full decoder"},
    {"txn_hash", (PyCFunction)(void (*)(void))py_txn_hash, METH_FASTCALL,
     "txn_hash(most, least) -> the hash scan() uses for a transaction id"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_scan",
    .m_doc = "analyze's native entry scanner",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__scan(void)
{
    return PyModule_Create(&module);
}
