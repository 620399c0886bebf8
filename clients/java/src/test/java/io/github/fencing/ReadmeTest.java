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

    @Test
    void readmeWorker(@TempDir Path dir) throws Exception {
        ConnectionSource source = Db.source();
        String readme = Files.readString(Path.of("README.md"));
        Matcher m = Pattern.compile("(?ms)^```java\n(.*?)^```").matcher(readme);
        assertTrue(m.find(), "a java block in README.md");
        String code = m.group(1);
        long lines = code.lines().filter(l -> !l.isBlank()).count();
        assertTrue(lines <= 25, "the README's worker is " + lines + " lines");
        Path file = dir.resolve("PayWorker.java");
        Files.writeString(file, code);
        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        assertEquals(0, javac.run(null, null, null, "-cp", classpath, "-d", dir.toString(), file.toString()));

        try (Connection c = source.connect()) {
            Db.exec(c, "CREATE EXTENSION IF NOT EXISTS fencing");
            Db.exec(c, "DROP TABLE IF EXISTS orders");
            Db.exec(c, "CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL)");
            Db.exec(c, "SELECT fencing.protect('orders')");
            Db.exec(c, "INSERT INTO orders VALUES ('order:101', 'new', 1)");
            String out = run(dir);
            assertTrue(out.matches("paid with token \\d+: 1 row\\s*"), out);
            assertEquals("paid", Db.one(c, "SELECT status FROM orders WHERE id = 'order:101'"));
            // A newer holder writes with a token above every lease's: the worker is fenced out.
            long newer = 1L << 53;
            Fencing.fenced(c, newer, x -> {
                Db.exec(x, "UPDATE orders SET status = 'shipped' WHERE id = 'order:101'");
                return null;
            });
            out = run(dir);
            assertTrue(out.matches("fenced out: presented \\d+, stored " + newer + "\\s*"), out);
            assertTrue(ERR.toString(StandardCharsets.UTF_8).startsWith("dead letter: "), "the dead-letter hook ran");
            assertEquals("shipped", Db.one(c, "SELECT status FROM orders WHERE id = 'order:101'"));
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
