/* The protobuf wire format as both native modules read it (pipeline/_scan.c, codec/_render.c):
 * varints in their shortest form, tags, length-delimited bodies. Each returns 0 for anything it does
 * not accept, and its module then leaves the entry to the protobuf decoder. */
#ifndef PULSAR_TXN_WIRE_H
#define PULSAR_TXN_WIRE_H

#include <stdint.h>

typedef const uint8_t *ptr;

enum { VARINT = 0, I64 = 1, LEN = 2, I32 = 5 }; /* wire types */

/* A varint in its shortest form (as every encoder writes them) of at most `limit` bytes that
 * fits 64 bits; 0 for anything else, including the longer forms decoders tolerate. */
static inline int varint_of(ptr *p, ptr end, uint64_t *out, int limit)
{
    uint64_t value = 0;
    ptr q = *p;
    for (int i = 0, shift = 0; i < limit; i++, shift += 7) {
        if (q >= end)
            return 0;
        uint8_t byte = *q++;
        if (shift == 63 && byte > 1)
            return 0;
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            if (byte == 0 && i > 0)
                return 0; /* a padded form */
            *p = q;
            *out = value;
            return 1;
        }
    }
    return 0;
}

static inline int varint(ptr *p, ptr end, uint64_t *out)
{
    return varint_of(p, end, out, 10);
}

/* A field's tag: number >= 1, at most five bytes and 32 bits, as protobuf requires. */
static inline int tag(ptr *p, ptr end, uint32_t *number, uint32_t *wire)
{
    uint64_t t;
    if (!varint_of(p, end, &t, 5) || t > 0xFFFFFFFFu || (t >> 3) == 0)
        return 0;
    *number = (uint32_t)(t >> 3);
    *wire = (uint32_t)(t & 7);
    return 1;
}

/* The body of a length-delimited field: [*body, *body_end). */
static inline int delimited(ptr *p, ptr end, ptr *body, ptr *body_end)
{
    uint64_t n;
    if (!varint_of(p, end, &n, 5) || n > (uint64_t)(end - *p))
        return 0;
    *body = *p;
    *body_end = *p + n;
    *p = *body_end;
    return 1;
}

#endif
