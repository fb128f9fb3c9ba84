package store.reporting.jvm;

/** A record body that does not decode (where Python raises ValueError). Carries no text and
 *  no stack trace: the UDFs turn it into the error sentinel, and Python names the fault. */
final class BadRecord extends RuntimeException {
    private static final long serialVersionUID = 1L;
    static final BadRecord INSTANCE = new BadRecord();

    private BadRecord() {
        super("bad record", null, false, false);
    }

    /** Throws unless {@code ok}. */
    static void check(boolean ok) {
        if (!ok) throw INSTANCE;
    }
}
