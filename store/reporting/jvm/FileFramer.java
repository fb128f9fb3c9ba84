package store.reporting.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32;

/** The record framing of a journal file, as store.file.format.decode_header and
 *  store.file.reader.python_scan read it (rules 1-6 of store.file.format: length, type,
 *  file id, lsn sequence, CRC, length copy; zero padding to 512-byte boundaries), and
 *  reader.marker_of's file-list markers. Pure static functions. */
final class FileFramer {
    private FileFramer() {}

    static final int HEADER_SIZE = 32, OVERHEAD = 60, PAD_UNIT = 512;
    static final int EVENT = 10, ROLLBACK = 19;
    static final int FLAG_FLOOR = 2, FLAG_MARKER = 4;

    /** One record in sequence: offset, length, type, user type, lsn, id, tx id, tx count,
     *  and where its body lies in the file. */
    static final class Raw {
        final int pos, length, type, userType, flags;
        final long id, txId, txCount;

        Raw(byte[] d, int pos) {
            this.pos = pos;
            length = Bytes.i32le(d, pos);
            type = d[pos + 4] & 0xff;
            userType = d[pos + 5] & 0xff;
            flags = d[pos + 7] & 0xff;
            id = Bytes.i64le(d, pos + 32);
            txId = Bytes.i64le(d, pos + 40);
            txCount = Bytes.u32le(d, pos + 48);
        }

        int bodyStart() {
            return pos + 52;
        }

        int bodySize() {
            return length - OVERHEAD;
        }
    }

    /** decode_header: the file id, or null for a header of zeros (or a file shorter than
     *  one). Throws IllegalStateException naming {@code path} for a damaged header. */
    static Long fileId(byte[] d, String path) {
        if (d.length < HEADER_SIZE) return null;
        boolean zeros = true;
        for (int i = 0; i < HEADER_SIZE && zeros; i++) zeros = d[i] == 0;
        if (zeros) return null;
        if (d[0] != 'S' || d[1] != 'J' || d[2] != 'N' || d[3] != 'L')
            throw new IllegalStateException(path + " at offset 0: not a journal file (bad magic)");
        CRC32 crc = new CRC32();
        crc.update(d, 0, 28);
        if ((int) crc.getValue() != Bytes.i32le(d, 28))
            throw new IllegalStateException(path + " at offset 0: file header checksum mismatch");
        int version = Bytes.u16le(d, 4);
        if (version != 1)
            throw new IllegalStateException(
                path + " at offset 0: journal format version " + version + " is not supported");
        return Bytes.i64le(d, 8);
    }

    /** python_scan from DATA_START: the valid records in sequence. */
    static List<Raw> scan(byte[] d, long fileId) {
        List<Raw> out = new ArrayList<>();
        final int size = d.length;
        int dataEnd = size;  // everything from here on is zeros
        while (dataEnd > 0 && d[dataEnd - 1] == 0) dataEnd--;
        int pos = HEADER_SIZE, count = 0, paddedFrom = -1;
        long lastLsn = 0;
        Crc32 crc = new Crc32();
        while ((long) pos + OVERHEAD <= size) {
            long length = Bytes.u32le(d, pos);
            if (length == 0) {  // zero padding: the next record starts at a PAD_UNIT boundary
                if (pos >= dataEnd) break;
                int nz = pos;
                while (nz < size && d[nz] == 0) nz++;
                int boundary = nz - nz % PAD_UNIT;
                if (boundary <= pos || paddedFrom >= 0) break;
                paddedFrom = pos;
                pos = boundary;
                continue;
            }
            int rtype = d[pos + 4] & 0xff, fl = d[pos + 7] & 0xff;
            long fid = Bytes.i64le(d, pos + 8), lsn = Bytes.i64le(d, pos + 16);
            long dlsn = Bytes.i64le(d, pos + 24);
            boolean inSequence = count > 0
                ? lastLsn != -1L && lsn == lastLsn + 1
                : !((fl & FLAG_FLOOR) != 0 && lsn != 0 && Long.compareUnsigned(dlsn, lsn - 1) < 0);
            boolean valid = false;
            if (length >= OVERHEAD && length <= size - pos && fid == fileId
                && rtype >= EVENT && rtype <= ROLLBACK && inSequence) {
                int end = pos + (int) length;
                if (Bytes.u32le(d, end - 4) == length) {
                    int sum = crc.of(d, pos + 52, (int) length - OVERHEAD, pos, 52);
                    valid = sum == Bytes.i32le(d, end - 8);
                }
            }
            if (!valid) {
                // padding shorter than the length field, up to a PAD_UNIT boundary
                int gap = Math.floorMod(-pos, PAD_UNIT);
                if (gap > 0 && gap < 4 && paddedFrom < 0 && allZero(d, pos, pos + gap)) {
                    paddedFrom = pos;
                    pos += gap;
                    continue;
                }
                break;
            }
            out.add(new Raw(d, pos));
            lastLsn = lsn;
            count++;
            pos += (int) length;
            paddedFrom = -1;
        }
        return out;
    }

    private static boolean allZero(byte[] d, int from, int to) {
        for (int i = from; i < to; i++) if (d[i] != 0) return false;
        return true;
    }

    /** marker_of: an EVENT with FLAG_MARKER whose body format.decode_marker understands. */
    static boolean isMarker(byte[] d, Raw rec) {
        if (rec.type != EVENT || (rec.flags & FLAG_MARKER) == 0) return false;
        int at = rec.bodyStart(), n = rec.bodySize();
        if (n < 16) return false;  // MARKER_HEAD <4sBBHII
        if (d[at] != 'S' || d[at + 1] != 'J' || d[at + 2] != 'F' || d[at + 3] != 'L') return false;
        int kind = d[at + 4] & 0xff;
        long retired = Bytes.u32le(d, at + 8), entries = Bytes.u32le(d, at + 12);
        if (kind != 1 && kind != 2 || retired > entries) return false;
        return n == 16 + entries * 24;
    }
}
