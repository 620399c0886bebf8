package io.github.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.sql.BatchUpdateException;
import java.sql.SQLException;
import java.sql.SQLIntegrityConstraintViolationException;

import org.junit.jupiter.api.Test;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/** 23T01/23T02 mapping and DETAIL parsing, without a server (the texts of src/errors.cpp). */
class ExceptionsTest {

    static PSQLException error(String code, String message, String detail, String schema, String table,
            String column, String constraint) {
        StringBuilder b = new StringBuilder();
        b.append('S').append("ERROR").append('\0');
        b.append('C').append(code).append('\0');
        b.append('M').append(message).append('\0');
        if (detail != null) {
            b.append('D').append(detail).append('\0');
        }
        if (schema != null) {
            b.append('s').append(schema).append('\0');
        }
        if (table != null) {
            b.append('t').append(table).append('\0');
        }
        if (column != null) {
            b.append('c').append(column).append('\0');
        }
        if (constraint != null) {
            b.append('n').append(constraint).append('\0');
        }
        return new PSQLException(new ServerErrorMessage(b.toString()));
    }

    @Test
    void staleRow() {
        PSQLException p = error("23T01", "stale fencing token 5 for relation \"t\"",
                "Relation public.t, key (id)=(1): presented token 5, stored token 7 (monotonic mode).",
                "public", "t", "last_fencing_token", "fencing_stale_token");
        SQLException e = Fencing.translate(p);
        StaleTokenException s = assertInstanceOf(StaleTokenException.class, e);
        assertInstanceOf(SQLIntegrityConstraintViolationException.class, e);
        assertSame(p, s.getCause());
        assertEquals("23T01", s.getSQLState());
        assertEquals("public", s.schema());
        assertEquals("t", s.table());
        assertEquals("public.t", s.relation());
        assertEquals("last_fencing_token", s.column());
        assertEquals("fencing_stale_token", s.constraint());
        assertEquals("(id)=(1)", s.key());
        assertEquals(5L, s.presented());
        assertEquals(7L, s.stored());
        assertEquals("monotonic", s.mode());
        assertNull(s.resource());
    }

    @Test
    void staleOddKeyAndQuotedRelation() {
        StaleTokenException s = (StaleTokenException) Fencing.translate(error("23T01", "m",
                "Relation \"My S\".\"a, b\", key (k, x)=(a: b, 2): presented token 2264993953218559, stored token (not visible) (strict mode).",
                "My S", "a, b", "tok", "fencing_stale_token"));
        assertEquals("\"My S\".\"a, b\"", s.relation());
        assertEquals("(k, x)=(a: b, 2)", s.key());
        assertEquals(2264993953218559L, s.presented());
        assertNull(s.stored());
        assertEquals("strict", s.mode());
    }

    @Test
    void staleAllRowsAndResource() {
        StaleTokenException all = (StaleTokenException) Fencing.translate(error("23T01", "m",
                "Relation public.t, all rows: presented token 3, stored token 4 (monotonic mode).", "public", "t",
                "last_fencing_token", "fencing_stale_token"));
        assertNull(all.key());
        assertEquals(4L, all.stored());
        StaleTokenException res = (StaleTokenException) Fencing.translate(error("23T01",
                "stale fencing token 1 for resource \"order:500\"",
                "Resource \"order:500\": presented token 1, stored token 9 (monotonic mode).", null, null, null, null));
        assertEquals("order:500", res.resource());
        assertNull(res.table());
        assertNull(res.constraint());
        assertEquals(1L, res.presented());
        assertEquals(9L, res.stored());
    }

    @Test
    void missing() {
        MissingTokenException m = (MissingTokenException) Fencing.translate(error("23T02",
                "missing fencing token for UPDATE on relation \"t\"",
                "Relation public.t, key (id)=(1): no token presented, stored token 7.", "public", "t",
                "last_fencing_token", "fencing_missing_token"));
        assertEquals("23T02", m.getSQLState());
        assertEquals("(id)=(1)", m.key());
        assertNull(m.presented());
        assertEquals(7L, m.stored());
        assertEquals("fencing_missing_token", m.constraint());
        MissingTokenException note = (MissingTokenException) Fencing.translate(error("23T02", "m",
                "Relation public.t, key (id)=(2): no token presented, stored token 0. Some note about an ignored token.",
                "public", "t", "last_fencing_token", "fencing_missing_token"));
        assertEquals("(id)=(2)", note.key());
        assertEquals(0L, note.stored());
    }

    @Test
    void batchAndOthers() {
        PSQLException p = error("23T01", "m", "garbled", "public", "t", "c", "fencing_stale_token");
        BatchUpdateException batch = new BatchUpdateException("batch", new int[0]);
        batch.setNextException(p);
        StaleTokenException s = assertInstanceOf(StaleTokenException.class, Fencing.translate(batch));
        assertNull(s.presented());
        assertEquals("t", s.table());
        PSQLException other = error("23505", "duplicate key", null, null, null, null, null);
        assertSame(other, Fencing.translate(other));
    }
}
