package io.github.fencing;

import java.sql.SQLIntegrityConstraintViolationException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * A write the storage refused for its fencing token: {@link StaleTokenException} (SQLSTATE 23T01)
 * or {@link MissingTokenException} (23T02). It is a {@link SQLIntegrityConstraintViolationException}
 * (class 23, as the extension's SQLSTATEs are), whose cause is the driver's {@link PSQLException};
 * it exposes the fields of the server's error and what its DETAIL says ("Relation public.t, key
 * (id)=(1): presented token N, stored token M (monotonic mode).").
 */
public abstract class FencingTokenException extends SQLIntegrityConstraintViolationException {
    private static final long serialVersionUID = 1L;

    /* DETAIL of 23T01 (src/errors.cpp): a row, all rows (TRUNCATE), or a resource (fencing.fence()). */
    private static final Pattern STALE_DETAIL = Pattern.compile(
            "(?s)^(?:Relation (?<relation>.+?), (?:key (?<key>.*)|all rows)|Resource \"(?<resource>.*)\"):"
                    + " presented token (?<presented>\\d+), stored token (?<stored>\\d+|\\(not visible\\))"
                    + " \\((?<mode>\\w+) mode\\)\\.$");
    /* DETAIL of 23T02, possibly followed by a note on an ignored token. */
    private static final Pattern MISSING_DETAIL = Pattern.compile(
            "(?s)^Relation (?<relation>.+?), (?:key (?<key>.*)|all rows): no token presented,"
                    + " stored token (?<stored>\\d+|\\(not visible\\))\\..*$");

    private final String schema;
    private final String table;
    private final String column;
    private final String constraint;
    private final String relation;
    private final String key;
    private final String resource;
    private final Long presented;
    private final Long stored;
    private final String mode;

    FencingTokenException(PSQLException cause) {
        super(cause.getMessage(), cause.getSQLState(), cause.getErrorCode(), cause);
        ServerErrorMessage m = cause.getServerErrorMessage();
        String detail = m == null ? null : m.getDetail();
        schema = m == null ? null : m.getSchema();
        table = m == null ? null : m.getTable();
        column = m == null ? null : m.getColumn();
        constraint = m == null ? null : m.getConstraint();
        Matcher stale = detail == null ? null : STALE_DETAIL.matcher(detail);
        Matcher missing = detail == null ? null : MISSING_DETAIL.matcher(detail);
        if (stale != null && stale.matches()) {
            relation = stale.group("relation");
            key = keyOf(stale.group("key"));
            resource = stale.group("resource");
            presented = Long.valueOf(stale.group("presented"));
            stored = tokenOf(stale.group("stored"));
            mode = stale.group("mode");
        } else if (missing != null && missing.matches()) {
            relation = missing.group("relation");
            key = keyOf(missing.group("key"));
            resource = null;
            presented = null;
            stored = tokenOf(missing.group("stored"));
            mode = null;
        } else {
            relation = key = resource = mode = null;
            presented = stored = null;
        }
    }

    private static String keyOf(String key) {
        return key == null || key.equals("(not visible)") ? null : key;
    }

    private static Long tokenOf(String token) {
        return token.startsWith("(") ? null : Long.valueOf(token);
    }

    /** The driver's exception, with every field of the server's error. */
    public PSQLException psqlException() {
        return (PSQLException) getCause();
    }

    /** The schema of the table written (the error's schema field), or null (a resource). */
    public String schema() {
        return schema;
    }

    /** The table written, unqualified (the error's table field), or null (a resource). */
    public String table() {
        return table;
    }

    /** The table's token column (the error's column field), or null (a resource). */
    public String column() {
        return column;
    }

    /** {@code fencing_stale_token} or {@code fencing_missing_token}, or null (a resource). */
    public String constraint() {
        return constraint;
    }

    /** The relation as DETAIL names it, schema-qualified ({@code public.t}), or null. */
    public String relation() {
        return relation;
    }

    /**
     * The key of the refused row as DETAIL gives it, e.g. {@code (id)=(1)}; null for a TRUNCATE (all
     * rows), a resource, or a key the user may not see.
     */
    public String key() {
        return key;
    }

    /** The resource of a stale {@code fencing.fence()}, else null. */
    public String resource() {
        return resource;
    }

    /** The token the write presented; null for a missing token. */
    public Long presented() {
        return presented;
    }

    /** The token stored in the row (or resource), or null when not visible or not given. */
    public Long stored() {
        return stored;
    }

    /** {@code monotonic} or {@code strict} for a stale token, else null. */
    public String mode() {
        return mode;
    }
}
