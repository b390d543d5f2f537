/* `decode -o jsonl`'s hot path below Python: one entry's records -> their JSON array, as bytes.
 *
 * schema(spec) compiles a record type's field table, which tojson.native_spec builds from the
 * protobuf descriptors (so field order, JSON names and enum names have one source);
 * render(schema, data, batched) returns b'[{...},...]', byte for byte what entry_to_json's
 * records and orjson write for the same entry, or None.
 *
 * It answers only where the meaning is plain: shortest-form varints (_wire.h, shared with analyze's
 * scanner), expected wire types, no groups, each singular
 * message field at most once (protobuf would merge repeats), strings in valid UTF-8, required
 * fields present. On anything else it returns None and the caller converts the protobuf
 * objects in Python, so this path never changes a line: tests/codec/test_render.py compares
 * both on generated, mutated and hostile entries.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../_wire.h"

/* The kinds tojson.native_spec numbers fields with. */
enum { K_UINT64, K_INT64, K_UINT32, K_INT32, K_BOOL, K_ENUM, K_STRING, K_MESSAGE };
enum { MAX_FIELDS = 32, MAX_DEPTH = 16 };

typedef struct {
    int32_t number;
    char *text; /* the name as a JSON string, quotes included */
    Py_ssize_t len;
} Name;

typedef struct {
    uint32_t number;
    int kind, repeated, required, message; /* message: index of a K_MESSAGE field's type */
    char *key;                              /* "jsonName": */
    Py_ssize_t key_len;
    Name *names; /* a K_ENUM field's values */
    int n_names;
} Field;

typedef struct {
    Field *fields;
    int n;
} Message;

typedef struct {
    Message *messages; /* messages[0] is the record type */
    int n;
    uint32_t most, least; /* the record's txnid_most_bits and txnid_least_bits */
} Schema;

typedef struct {
    char *p;
    size_t len, cap;
} Out;

typedef struct {
    uint64_t value;
    ptr start, end;
    int present;
} Slot;

/* ------------------------------------------------------------------ wire format */

/* Past an unknown field's value; groups (wire types 3 and 4) are left to the decoder. */
static int skip(ptr *p, ptr end, uint32_t wire)
{
    uint64_t ignored;
    ptr b, e;
    switch (wire) {
    case VARINT:
        return varint(p, end, &ignored);
    case I64:
    case I32: {
        size_t n = wire == I64 ? 8 : 4;
        if ((size_t)(end - *p) < n)
            return 0;
        *p += n;
        return 1;
    }
    case LEN:
        return delimited(p, end, &b, &e);
    default:
        return 0;
    }
}

/* Valid UTF-8 as Python's strict decoder judges it: no overlong forms, no surrogates, at most
 * U+10FFFF. Anything else the Python path shows lossy, so it is left to it. */
static int utf8_ok(ptr p, ptr end)
{
    while (p < end) {
        uint8_t c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        int n;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            n = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else
            return 0;
        if (end - p <= n || p[1] < lo || p[1] > hi)
            return 0;
        for (int i = 2; i <= n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return 0;
        p += n + 1;
    }
    return 1;
}

/* ------------------------------------------------------------------ output */

static int put(Out *o, const char *s, size_t n)
{
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (p == NULL)
            return 0;
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    return 1;
}

static int put_u64(Out *o, uint64_t v)
{
    char digits[20];
    int i = sizeof digits;
    do {
        digits[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return put(o, digits + i, sizeof digits - i);
}

static int put_i64(Out *o, int64_t v)
{
    if (v >= 0)
        return put_u64(o, (uint64_t)v);
    return put(o, "-", 1) && put_u64(o, (uint64_t)0 - (uint64_t)v);
}

/* A JSON string as orjson writes it: quote, backslash and control characters escaped
 * (\b \t \n \f \r, else \u00xx), everything else as is. */
static int put_string(Out *o, ptr p, ptr end)
{
    static const char hex[] = "0123456789abcdef";
    if (!put(o, "\"", 1))
        return 0;
    ptr run = p;
    for (; p < end; p++) {
        uint8_t c = *p;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if (!put(o, (const char *)run, p - run))
            return 0;
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        size_t n = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\t': esc[1] = 't'; break;
        case '\n': esc[1] = 'n'; break;
        case '\f': esc[1] = 'f'; break;
        case '\r': esc[1] = 'r'; break;
        default:
            esc[1] = 'u';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        if (!put(o, esc, n))
            return 0;
        run = p + 1;
    }
    return put(o, (const char *)run, end - run) && put(o, "\"", 1);
}

/* ------------------------------------------------------------------ rendering */

static const Name *enum_name(const Field *f, uint64_t v)
{
    int32_t number = (int32_t)(uint32_t)v; /* upb reads an enum as int32, then checks it is known */
    for (int i = 0; i < f->n_names; i++)
        if (f->names[i].number == number)
            return &f->names[i];
    return NULL;
}

static int is_varint_kind(int kind)
{
    return kind != K_STRING && kind != K_MESSAGE;
}

/* batch_index: a record's position in its batch, UNBATCHED for a record alone, NESTED for a field's message */
enum { UNBATCHED = -1, NESTED = -2 };
static int render_message(const Schema *s, int index, ptr p, ptr end, Out *o, int depth, int64_t batch_index);

/* One value of field f: a varint's value, or the body [b, e) of a string or message. */
static int put_value(const Schema *s, const Field *f, uint64_t v, ptr b, ptr e, Out *o, int depth)
{
    switch (f->kind) {
    case K_UINT64: return put_u64(o, v);
    case K_INT64: return put_i64(o, (int64_t)v);
    case K_UINT32: return put_u64(o, (uint32_t)v);
    case K_INT32: return put_i64(o, (int32_t)(uint32_t)v);
    case K_BOOL: return v ? put(o, "true", 4) : put(o, "false", 5);
    case K_ENUM: {
        const Name *name = enum_name(f, v);
        return name != NULL && put(o, name->text, name->len);
    }
    case K_STRING: return put_string(o, b, e);
    default: return render_message(s, f->message, b, e, o, depth + 1, NESTED);
    }
}

static int find(const Message *m, uint32_t number)
{
    for (int i = 0; i < m->n; i++)
        if (m->fields[i].number == number)
            return i;
    return -1;
}

/* Pass 1: check every field of [p, end) and keep the last value of each singular one. */
static int collect(const Message *m, ptr p, ptr end, Slot *slots)
{
    while (p < end) {
        uint32_t number, wire;
        if (!tag(&p, end, &number, &wire))
            return 0;
        int i = find(m, number);
        if (i < 0) {
            if (!skip(&p, end, wire))
                return 0;
            continue;
        }
        const Field *f = &m->fields[i];
        uint64_t v;
        ptr b, e;
        if (is_varint_kind(f->kind) && wire == VARINT) {
            if (!varint(&p, end, &v))
                return 0;
            /* an unknown enum number is set aside by protobuf, leaving the field as it was */
            if (!f->repeated && (f->kind != K_ENUM || enum_name(f, v) != NULL)) {
                slots[i].value = v;
                slots[i].present = 1;
            }
        } else if (wire == LEN) {
            if (!delimited(&p, end, &b, &e))
                return 0;
            if (is_varint_kind(f->kind)) { /* a packed repeated field */
                if (!f->repeated)
                    return 0;
                while (b < e)
                    if (!varint(&b, e, &v))
                        return 0;
            } else if (f->kind == K_STRING && !utf8_ok(b, e))
                return 0;
            else if (!f->repeated) {
                if (f->kind == K_MESSAGE && slots[i].present)
                    return 0; /* protobuf merges the two: left to it */
                slots[i].start = b;
                slots[i].end = e;
                slots[i].present = 1;
            }
        } else
            return 0;
    }
    return 1;
}

/* Pass 2 for a repeated field: its elements in wire order, as "key":[...] (nothing when none). */
static int put_repeated(const Schema *s, const Field *f, ptr p, ptr end, Out *o, int depth, int *first)
{
    int count = 0;
    while (p < end) {
        uint32_t number = 0, wire = 0;
        uint64_t v = 0;
        ptr b = NULL, e = NULL;
        tag(&p, end, &number, &wire); /* collect() has checked every field */
        if (number != f->number) {
            skip(&p, end, wire);
            continue;
        }
        ptr packed = NULL, packed_end = NULL;
        if (wire == VARINT)
            varint(&p, end, &v);
        else {
            delimited(&p, end, &b, &e);
            if (is_varint_kind(f->kind)) {
                packed = b;
                packed_end = e;
            }
        }
        do {
            if (packed != NULL && packed < packed_end)
                varint(&packed, packed_end, &v);
            else if (packed != NULL)
                break;
            if (f->kind == K_ENUM && enum_name(f, v) == NULL)
                continue; /* set aside, as for a singular enum */
            const char *sep = count ? "," : (*first ? "" : ",");
            if (!put(o, sep, strlen(sep)) || (!count && (!put(o, f->key, f->key_len) || !put(o, "[", 1))))
                return 0;
            *first = 0;
            count++;
            if (!put_value(s, f, v, b, e, o, depth))
                return 0;
        } while (packed != NULL);
    }
    return count == 0 || put(o, "]", 1);
}

/* One message as a JSON object; a record starts with batchIndex (when in a batch) and txnId. */
static int render_message(const Schema *s, int index, ptr p, ptr end, Out *o, int depth, int64_t batch_index)
{
    const Message *m = &s->messages[index];
    Slot slots[MAX_FIELDS];
    memset(slots, 0, sizeof(Slot) * m->n);
    if (depth > MAX_DEPTH || !collect(m, p, end, slots) || !put(o, "{", 1))
        return 0;
    int first = 1;
    if (batch_index != NESTED) {
        int most = find(m, s->most), least = find(m, s->least);
        if (batch_index >= 0 && !(put(o, "\"batchIndex\":", 13) && put_u64(o, (uint64_t)batch_index) && put(o, ",", 1)))
            return 0;
        if (!(put(o, "\"txnId\":\"(", 10) && put_u64(o, slots[most].present ? slots[most].value : 0) && put(o, ",", 1) &&
              put_u64(o, slots[least].present ? slots[least].value : 0) && put(o, ")\"", 2)))
            return 0;
        first = 0;
    }
    for (int i = 0; i < m->n; i++) {
        const Field *f = &m->fields[i];
        if (f->repeated) {
            if (!put_repeated(s, f, p, end, o, depth, &first))
                return 0;
            continue;
        }
        if (!slots[i].present) {
            if (f->required)
                return 0;
            continue;
        }
        if (!(put(o, first ? "" : ",", !first) && put(o, f->key, f->key_len) &&
              put_value(s, f, slots[i].value, slots[i].start, slots[i].end, o, depth)))
            return 0;
        first = 0;
    }
    return put(o, "}", 1);
}

/* The records of an entry: the batched container's field 1, or the whole entry as one record. */
static int render_entry(const Schema *s, ptr p, ptr end, int batched, Out *o)
{
    if (!put(o, "[", 1))
        return 0;
    if (!batched)
        return render_message(s, 0, p, end, o, 0, UNBATCHED) && put(o, "]", 1);
    int64_t index = 0;
    while (p < end) {
        uint32_t number, wire;
        ptr b, e;
        if (!tag(&p, end, &number, &wire))
            return 0;
        if (number != 1) {
            if (!skip(&p, end, wire))
                return 0;
            continue;
        }
        if (wire != LEN || !delimited(&p, end, &b, &e))
            return 0;
        if ((index && !put(o, ",", 1)) || !render_message(s, 0, b, e, o, 0, index))
            return 0;
        index++;
    }
    return put(o, "]", 1);
}

/* ------------------------------------------------------------------ the schema */

static void free_schema(Schema *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->n; i++) {
        Message *m = &s->messages[i];
        for (int j = 0; j < m->n; j++) {
            free(m->fields[j].key);
            for (int k = 0; k < m->fields[j].n_names; k++)
                free(m->fields[j].names[k].text);
            free(m->fields[j].names);
        }
        free(m->fields);
    }
    free(s->messages);
    free(s);
}

static void capsule_free(PyObject *capsule)
{
    free_schema(PyCapsule_GetPointer(capsule, "pulsar_txn_cli.codec._render.schema"));
}

static char *copy_bytes(PyObject *bytes, Py_ssize_t *len)
{
    char *data;
    if (PyBytes_AsStringAndSize(bytes, &data, len) < 0)
        return NULL;
    char *out = malloc(*len ? *len : 1);
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(out, data, *len);
    return out;
}

static int fill_field(Field *f, PyObject *spec, int n_messages)
{
    PyObject *key, *names;
    if (!PyArg_ParseTuple(spec, "IiSppOi", &f->number, &f->kind, &key, &f->repeated, &f->required, &names,
                          &f->message))
        return 0;
    if (f->kind < K_UINT64 || f->kind > K_MESSAGE || (f->kind == K_MESSAGE && (f->message < 0 || f->message >= n_messages))) {
        PyErr_SetString(PyExc_ValueError, "a field's kind or message index is out of range");
        return 0;
    }
    if ((f->key = copy_bytes(key, &f->key_len)) == NULL)
        return 0;
    if (names == Py_None)
        return 1;
    PyObject *items = PySequence_Fast(names, "enum names must be a sequence");
    if (items == NULL)
        return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    f->names = calloc(n ? n : 1, sizeof(Name));
    int ok = f->names != NULL;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *text;
        ok = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "iS", &f->names[i].number, &text) &&
             (f->names[i].text = copy_bytes(text, &f->names[i].len)) != NULL;
        f->n_names += ok;
    }
    Py_DECREF(items);
    return ok;
}

static PyObject *schema(PyObject *self, PyObject *spec)
{
    PyObject *messages;
    Schema *s = calloc(1, sizeof(Schema));
    if (s == NULL)
        return PyErr_NoMemory();
    if (!PyArg_ParseTuple(spec, "O!II", &PyTuple_Type, &messages, &s->most, &s->least)) {
        free(s);
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(messages);
    s->messages = calloc(n ? n : 1, sizeof(Message));
    int ok = s->messages != NULL && n > 0;
    for (Py_ssize_t i = 0; ok && i < n; i++, s->n++) {
        PyObject *fields = PyTuple_GET_ITEM(messages, i);
        Message *m = &s->messages[i];
        ok = PyTuple_Check(fields) && PyTuple_GET_SIZE(fields) <= MAX_FIELDS &&
             (m->fields = calloc(PyTuple_GET_SIZE(fields) + 1, sizeof(Field))) != NULL;
        for (Py_ssize_t j = 0; ok && j < PyTuple_GET_SIZE(fields); j++, m->n++)
            ok = fill_field(&m->fields[j], PyTuple_GET_ITEM(fields, j), (int)n);
    }
    if (ok && (find(&s->messages[0], s->most) < 0 || find(&s->messages[0], s->least) < 0))
        ok = 0;
    if (!ok) {
        free_schema(s);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "not a schema: (messages, most, least) with at most 32 fields a message");
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(s, "pulsar_txn_cli.codec._render.schema", capsule_free);
    if (capsule == NULL)
        free_schema(s);
    return capsule;
}

static PyObject *render(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "render(schema, data, batched)");
        return NULL;
    }
    const Schema *s = PyCapsule_GetPointer(args[0], "pulsar_txn_cli.codec._render.schema");
    if (s == NULL)
        return NULL;
    if (!PyBytes_CheckExact(args[1]))
        Py_RETURN_NONE;
    int batched = PyObject_IsTrue(args[2]);
    if (batched < 0)
        return NULL;
    ptr data = (ptr)PyBytes_AS_STRING(args[1]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[1]);
    if (batched && size < 4)
        Py_RETURN_NONE;
    Out out = {NULL, 0, 0};
    PyObject *result = NULL;
    if (render_entry(s, data + (batched ? 4 : 0), data + size, batched, &out))
        result = PyBytes_FromStringAndSize(out.p, out.len);
    else {
        result = Py_None;
        Py_INCREF(result);
    }
    free(out.p);
    return result;
}

static PyMethodDef methods[] = {
    {"schema", schema, METH_O, "schema((messages, most, least)) -> a compiled field table (tojson.native_spec)"},
    {"render", (PyCFunction)(void (*)(void))render, METH_FASTCALL,
     "render(schema, data, batched) -> the records' JSON array as bytes, or None for the Python path"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_render",
    .m_doc = "decode's native JSON renderer of transaction-log records",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__render(void)
{
    return PyModule_Create(&module);
}
