package store.reporting.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF3;

/** (journal, path, content) -> the records of one journal file as
 *  store.reporting.decode.file_records gives them, without its {@code journal} column: seq
 *  long, pos long, kind int, id long, tx_id long, user_record_type int, size long, the 11
 *  decoded columns of {@link RecordDecoder}, tx_count int, tx_seen int. A header of zeros
 *  gives no rows; a damaged header throws IllegalStateException naming the path. */
public class FileRecordsUdf implements UDF3<String, String, byte[], List<Row>> {
    private static final long serialVersionUID = 1L;
    private static final int ADD_TX = 13, UPDATE_TX = 14, DELETE_TX = 15, PREPARE = 17,
        COMMIT = 18, ROLLBACK = 19;

    @Override
    public List<Row> call(String journal, String path, byte[] content) {
        List<Row> out = new ArrayList<>();
        byte[] d = content == null ? new byte[0] : content;
        Long fileId = FileFramer.fileId(d, path);
        if (fileId == null) return out;
        Map<Long, Integer> inFile = new HashMap<>();  // tx id -> its records since it last ended
        for (FileFramer.Raw rec : FileFramer.scan(d, fileId)) {
            if (FileFramer.isMarker(d, rec)) continue;
            Integer count = null, seen = null;
            int t = rec.type;
            if (t == ADD_TX || t == UPDATE_TX || t == DELETE_TX) {
                inFile.merge(rec.txId, 1, Integer::sum);
            } else if (t == PREPARE) {
                count = (int) rec.txCount;
                seen = inFile.getOrDefault(rec.txId, 0);
                if ((long) seen != rec.txCount) inFile.remove(rec.txId);  // a torn prepare ends it
            } else if (t == COMMIT) {
                count = (int) rec.txCount;
                Integer n = inFile.remove(rec.txId);
                seen = n == null ? 0 : n;
            } else if (t == ROLLBACK) {
                inFile.remove(rec.txId);
            }
            byte[] body = Arrays.copyOfRange(d, rec.bodyStart(), rec.bodyStart() + rec.bodySize());
            Object[] decoded = RecordDecoder.decode(journal, t, rec.userType, body);
            Object[] row = new Object[20];
            row[0] = fileId;
            row[1] = (long) rec.pos;
            row[2] = t;
            row[3] = rec.id;
            row[4] = rec.txId;
            row[5] = rec.userType;
            row[6] = (long) rec.bodySize();
            System.arraycopy(decoded, 0, row, 7, RecordDecoder.COLUMNS);
            row[18] = count;
            row[19] = seen;
            out.add(RowFactory.create(row));
        }
        return out;
    }
}
