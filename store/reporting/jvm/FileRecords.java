package store.reporting.jvm;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** store.reporting.decode.file_records without its {@code journal} column: the records of one
 *  journal file, each as the values of seq long, pos long, kind int, id long, tx_id long,
 *  user_record_type int, size long, the 13 decoded columns of {@link RecordDecoder}, tx_count
 *  int, tx_seen int (Java types; strings as String or UTF8String). The file is framed once
 *  (which records are valid, and each transaction's counts, which depend on the records
 *  before); a record's body is decoded only when its row is asked for, so a caller that
 *  streams the rows holds one at a time. Immutable after construction. */
final class FileRecords {
    static final int COLUMNS = 22;
    private static final int ADD_TX = 13, UPDATE_TX = 14, DELETE_TX = 15, PREPARE = 17,
        COMMIT = 18, ROLLBACK = 19;

    private final String journal;
    private final byte[] d;
    private final Long fileId;  // boxed once: every row holds it
    private final FileFramer.Raw[] records;
    private final Integer[] counts, seen;

    /** The records of the file at {@code path} whose bytes are {@code content} (null: empty).
     *  A header of zeros gives none; a damaged header throws IllegalStateException naming the
     *  path. */
    FileRecords(String journal, String path, byte[] content) {
        this.journal = journal;
        d = content == null ? new byte[0] : content;
        Long id = FileFramer.fileId(d, path);
        fileId = id == null ? 0L : id;
        List<FileFramer.Raw> all = id == null ? List.of() : FileFramer.scan(d, id);
        FileFramer.Raw[] kept = new FileFramer.Raw[all.size()];
        counts = new Integer[kept.length];
        seen = new Integer[kept.length];
        Map<Long, Integer> inFile = new HashMap<>();  // tx id -> its records since it last ended
        int n = 0;
        for (FileFramer.Raw rec : all) {
            if (FileFramer.isMarker(d, rec)) continue;
            int t = rec.type;
            if (t == ADD_TX || t == UPDATE_TX || t == DELETE_TX) {
                inFile.merge(rec.txId, 1, Integer::sum);
            } else if (t == PREPARE) {
                counts[n] = (int) rec.txCount;
                seen[n] = inFile.getOrDefault(rec.txId, 0);
                if ((long) seen[n] != rec.txCount) inFile.remove(rec.txId);  // a torn prepare ends it
            } else if (t == COMMIT) {
                counts[n] = (int) rec.txCount;
                Integer c = inFile.remove(rec.txId);
                seen[n] = c == null ? 0 : c;
            } else if (t == ROLLBACK) {
                inFile.remove(rec.txId);
            }
            kept[n++] = rec;
        }
        records = Arrays.copyOf(kept, n);
    }

    int size() {
        return records.length;
    }

    /** The values of record {@code i}'s row. */
    Object[] row(int i) {
        FileFramer.Raw rec = records[i];
        Object[] row = new Object[COLUMNS];
        if (!RecordDecoder.fastMessage(journal, rec.type, rec.userType, d, rec.bodyStart(),
                                       rec.bodySize(), row, 7)) {
            byte[] body = Arrays.copyOfRange(d, rec.bodyStart(), rec.bodyStart() + rec.bodySize());
            Object[] decoded = RecordDecoder.decode(journal, rec.type, rec.userType, body);
            System.arraycopy(decoded, 0, row, 7, RecordDecoder.COLUMNS);
        }
        row[0] = fileId;
        row[1] = (long) rec.pos;
        row[2] = rec.type;
        row[3] = rec.id;
        row[4] = rec.txId;
        row[5] = rec.userType;
        row[6] = (long) rec.bodySize();
        row[20] = counts[i];
        row[21] = seen[i];
        return row;
    }
}
