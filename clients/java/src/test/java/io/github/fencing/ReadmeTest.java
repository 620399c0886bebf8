package io.github.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** README.md's worker compiles and runs: it pays order:101, and is fenced out once a newer token wrote. */
class ReadmeTest {

    /** The worker's lines of user logic: not blank, not a comment, not the table setup (createOrders). */
    static long userLines(String code) {
        String logic = code.substring(0, code.indexOf("    static void createOrders"));
        return logic.lines().map(String::strip).filter(l -> !l.isEmpty() && !l.startsWith("//")).count();
    }

    @Test
    void readmeWorker(@TempDir Path dir) throws Exception {
        ConnectionSource source = Db.source();
        String readme = Files.readString(Path.of("README.md"));
        Matcher m = Pattern.compile("(?ms)^```java\n(.*?)^```").matcher(readme);
        assertTrue(m.find(), "a java block in README.md");
        String code = m.group(1);
        long lines = userLines(code);
        assertTrue(lines <= 25, "the README's worker is " + lines + " lines of user logic");
        String docs = Files.readString(Path.of("../../docs/clients.md"));
        String java = docs.substring(docs.indexOf("\n## Java\n"), docs.indexOf("\n## Node\n"));
        Matcher d = Pattern.compile("(?ms)^```java\n(.*?)^```").matcher(java);
        assertTrue(d.find(), "a java block in the Java section of docs/clients.md");
        assertEquals(code, d.group(1), "docs/clients.md shows the README's worker");
        Path file = dir.resolve("PayWorker.java");
        Files.writeString(file, code);
        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        assertEquals(0, javac.run(null, null, null, "-cp", classpath, "-d", dir.toString(), file.toString()));

        try (Connection c = source.connect()) {
            Db.exec(c, "CREATE EXTENSION IF NOT EXISTS fencing");
            String out = run(dir);
            Matcher paid = Pattern.compile("paid with token (\\d+)\\s+refused: orders \\(id\\)=\\(101\\) (\\d+) < (\\d+)\\s*")
                    .matcher(out);
            assertTrue(paid.matches(), out);
            long token = Long.parseLong(paid.group(1));
            assertEquals(token - 1, Long.parseLong(paid.group(2)));
            assertEquals(token, Long.parseLong(paid.group(3)));
            assertEquals("paid", Db.one(c, "SELECT status FROM orders WHERE id = 101"));
            assertEquals(token, ((Number) Db.one(c, "SELECT last_fencing_token FROM orders WHERE id = 101")).longValue());
            assertEquals(false, Db.one(c, "SELECT live FROM fencing.leases WHERE resource = 'order:101'"), "released");
            Db.exec(c, "DROP TABLE orders");
        }
    }

    private static final ByteArrayOutputStream ERR = new ByteArrayOutputStream();

    private static String run(Path dir) throws Exception {
        PrintStream saved = System.out;
        PrintStream savedErr = System.err;
        ERR.reset();
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        try (URLClassLoader loader = new URLClassLoader(new URL[] {dir.toUri().toURL()},
                ReadmeTest.class.getClassLoader())) {
            System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(ERR, true, StandardCharsets.UTF_8));
            Method main = loader.loadClass("PayWorker").getMethod("main", String[].class);
            main.invoke(null, (Object) new String[0]);
        } finally {
            System.setOut(saved);
            System.setErr(savedErr);
        }
        return captured.toString(StandardCharsets.UTF_8);
    }
}
