import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;
import org.springframework.dao.DataAccessException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.SingleConnectionDataSource;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/*
 * PgJDBC and Spring's JdbcTemplate against a stale (23T01) and an unfenced
 * (23T02) write: the class of the exception and the SQLSTATE, constraint,
 * column, table and schema it carries.  Prints "test drivers_jdbc ..." and
 * "test drivers_spring ...".  The database (PG* environment, over TCP on
 * 127.0.0.1) is the one test/drivers/run prepares.
 */
public class Drivers {
    static final String UPDATE = "UPDATE shop.orders SET status = 'late' WHERE id = 'order:1'";
    static final String STALE_TOKEN = "SELECT set_config('fencing.token', '4', true)";

    static String fields(String cls, SQLException e) {
        ServerErrorMessage m = ((PSQLException) e).getServerErrorMessage();
        return String.join(" ", cls, e.getSQLState(), m.getConstraint(), m.getColumn(),
                           m.getTable(), m.getSchema());
    }

    static String want(String cls, String state) {
        String constraint = state.equals("23T01") ? "fencing_stale_token" : "fencing_missing_token";
        return String.join(" ", cls, state, constraint, "epoch", "orders", "shop");
    }

    static boolean report(String driver, List<String> failures) {
        System.out.println("test drivers_" + driver + " ... " + (failures.isEmpty() ? "ok" : "FAILED"));
        for (String f : failures)
            System.out.println("  " + f);
        return failures.isEmpty();
    }

    static void expect(List<String> failures, String state, String seen, String want) {
        if (!seen.equals(want))
            failures.add(state + ": got " + seen + ", want " + want);
    }

    static String jdbcWrite(Connection c, boolean stale) throws SQLException {
        try (Statement s = c.createStatement()) {
            c.setAutoCommit(false);
            if (stale)
                s.execute(STALE_TOKEN);
            s.executeUpdate(UPDATE);
            c.commit();
            return "no error";
        } catch (SQLException e) {
            c.rollback();
            return fields(e.getClass().getName(), e);
        } finally {
            c.setAutoCommit(true);
        }
    }

    static String springWrite(JdbcTemplate jdbc, TransactionTemplate tx, boolean stale) {
        try {
            tx.execute(status -> {
                if (stale)
                    jdbc.queryForObject(STALE_TOKEN, String.class);
                return jdbc.update(UPDATE);
            });
            return "no error";
        } catch (DataAccessException e) {
            return fields(e.getClass().getName(), (SQLException) e.getMostSpecificCause());
        }
    }

    public static void main(String[] args) throws SQLException {
        Logger.getLogger("org.springframework").setLevel(Level.WARNING); // no INFO lines on stderr
        String url = "jdbc:postgresql://127.0.0.1:" + System.getenv("PGPORT") + "/" +
                     System.getenv("PGDATABASE");
        boolean ok;
        try (Connection c = DriverManager.getConnection(url, System.getenv("PGUSER"), "")) {
            List<String> failures = new ArrayList<>();
            String cls = PSQLException.class.getName();
            expect(failures, "23T01", jdbcWrite(c, true), want(cls, "23T01"));
            expect(failures, "23T02", jdbcWrite(c, false), want(cls, "23T02"));
            ok = report("jdbc", failures);
        }
        SingleConnectionDataSource ds =
            new SingleConnectionDataSource(url, System.getenv("PGUSER"), "", true);
        try {
            JdbcTemplate jdbc = new JdbcTemplate(ds);
            TransactionTemplate tx = new TransactionTemplate(new DataSourceTransactionManager(ds));
            List<String> failures = new ArrayList<>();
            String cls = "org.springframework.dao.DataIntegrityViolationException";
            expect(failures, "23T01", springWrite(jdbc, tx, true), want(cls, "23T01"));
            expect(failures, "23T02", springWrite(jdbc, tx, false), want(cls, "23T02"));
            ok = report("spring", failures) && ok;
        } finally {
            ds.destroy();
        }
        System.exit(ok ? 0 : 1);
    }
}
