package store.reporting.jvm;

import java.nio.charset.StandardCharsets;

/** Fixed-width reads of a byte array (big-endian for record bodies, little-endian for the
 *  journal file framing) and strict UTF-8 decoding, as Python's {@code bytes.decode("utf-8")}
 *  accepts it (well-formed sequences only: no overlongs, surrogates or code points past
 *  U+10FFFF). Pure static functions. */
final class Bytes {
    private Bytes() {}

    static int u16le(byte[] d, int p) {
        return (d[p] & 0xff) | (d[p + 1] & 0xff) << 8;
    }

    static int i32le(byte[] d, int p) {
        return (d[p] & 0xff) | (d[p + 1] & 0xff) << 8 | (d[p + 2] & 0xff) << 16 | (d[p + 3] & 0xff) << 24;
    }

    static long u32le(byte[] d, int p) {
        return i32le(d, p) & 0xffffffffL;
    }

    static long i64le(byte[] d, int p) {
        long v = 0;
        for (int i = 7; i >= 0; i--) v = v << 8 | (d[p + i] & 0xffL);
        return v;
    }

    static int i32be(byte[] d, int p) {
        return (d[p] & 0xff) << 24 | (d[p + 1] & 0xff) << 16 | (d[p + 2] & 0xff) << 8 | (d[p + 3] & 0xff);
    }

    static long u32be(byte[] d, int p) {
        return i32be(d, p) & 0xffffffffL;
    }

    static long i64be(byte[] d, int p) {
        long v = 0;
        for (int i = 0; i < 8; i++) v = v << 8 | (d[p + i] & 0xffL);
        return v;
    }

    /** True when d[off, off+len) is well-formed UTF-8 (Unicode table 3-7, what CPython's
     *  strict decoder accepts). */
    static boolean validUtf8(byte[] d, int off, int len) {
        int i = off, end = off + len;
        while (i < end) {
            int b = d[i] & 0xff;
            if (b < 0x80) { i++; continue; }
            int n, lo = 0x80, hi = 0xbf;
            if (b >= 0xc2 && b <= 0xdf) n = 1;
            else if (b == 0xe0) { n = 2; lo = 0xa0; }
            else if (b >= 0xe1 && b <= 0xec || b == 0xee || b == 0xef) n = 2;
            else if (b == 0xed) { n = 2; hi = 0x9f; }
            else if (b == 0xf0) { n = 3; lo = 0x90; }
            else if (b >= 0xf1 && b <= 0xf3) n = 3;
            else if (b == 0xf4) { n = 3; hi = 0x8f; }
            else return false;
            if (i + n >= end) return false;  // the sequence is cut off
            int c = d[i + 1] & 0xff;
            if (c < lo || c > hi) return false;
            for (int k = 2; k <= n; k++) {
                c = d[i + k] & 0xff;
                if (c < 0x80 || c > 0xbf) return false;
            }
            i += n + 1;
        }
        return true;
    }

    /** The text of d[off, off+len), or null when it is not strict UTF-8. */
    static String utf8(byte[] d, int off, int len) {
        if (!validUtf8(d, off, len)) return null;
        return new String(d, off, len, StandardCharsets.UTF_8);
    }
}
