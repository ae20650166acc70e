package kraftreplay.codegen;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.Reader;
import java.io.StringReader;
import java.io.StringWriter;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.WeakHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

import org.codehaus.janino.ClassBodyEvaluator;
import org.codehaus.janino.SimpleCompiler;

/**
 * Spark's generated code, compiled once per machine rather than once per driver.
 *
 * <p>Spark turns every query stage into Java source and compiles it with Janino; it keeps the classes for the
 * driver's lifetime, keyed by the source text. A command that starts its own driver therefore compiles the same
 * several hundred classes every time (the small sample's ingest and replay: 745 compilations, 8.1 s). This cache keeps
 * the bytecode Janino made, in one file per source text, under a directory named after the Java, Spark and Janino it
 * was compiled with (the Python side picks it), and a later driver loads those classes instead of compiling.
 *
 * <p>Only Spark's compilations are cached (the file name {@value #SPARK_FILE_NAME} and class name Spark gives them);
 * the key is a SHA-256 of what the compiled classes depend on besides the class path: the class name, its super
 * class, interfaces, default imports and the source text. A file that cannot be read or loaded is removed and the
 * source compiled as if it were not there.
 */
public final class CodegenCache {
    static final String SPARK_FILE_NAME = "generated.java";
    private static final int FORMAT = 1;
    private static final String SUFFIX = ".classes";

    private static volatile Path directory;
    private static volatile boolean enabled;
    private static final AtomicLong HITS = new AtomicLong();
    private static final AtomicLong MISSES = new AtomicLong();
    private static final AtomicLong STORED = new AtomicLong();
    private static final AtomicLong FAILURES = new AtomicLong();
    // what a cook in progress will store (miss), and the classes a hit handed out (for getBytecodes)
    private static final Map<Object, String> PENDING = Collections.synchronizedMap(new WeakHashMap<>());
    private static final Map<Object, Map<String, byte[]>> LOADED = Collections.synchronizedMap(new WeakHashMap<>());

    private static final Field RESULT = field(ClassBodyEvaluator.class, "result");
    private static final Field COMPILER = field(ClassBodyEvaluator.class, "sc");
    private static final Field CLASS_NAME = field(ClassBodyEvaluator.class, "className");
    private static final Field EXTENDED = field(ClassBodyEvaluator.class, "extendedType");
    private static final Field IMPLEMENTED = field(ClassBodyEvaluator.class, "implementedTypes");
    private static final Field IMPORTS = field(ClassBodyEvaluator.class, "defaultImports");
    private static final Field PARENT = field(SimpleCompiler.class, "parentClassLoader");

    private CodegenCache() {}

    private static Field field(Class<?> owner, String name) {
        try {
            Field f = owner.getDeclaredField(name);
            f.setAccessible(true);
            return f;
        } catch (NoSuchFieldException e) {
            throw new IllegalStateException(owner.getName() + " has no field " + name + " (another Janino?)", e);
        }
    }

    static void open(String dir) throws IOException {
        if (dir == null || dir.isEmpty()) {
            throw new IllegalArgumentException("no directory given (-javaagent:JAR=DIRECTORY)");
        }
        Path path = Paths.get(dir);
        Files.createDirectories(path);
        directory = path;
    }

    static void enable() {
        enabled = true;
    }

    /** Whether the agent patched Janino and the cache is in use. */
    public static boolean enabled() {
        return enabled;
    }

    public static String directory() {
        return String.valueOf(directory);
    }

    public static long hits() {
        return HITS.get();
    }

    public static long misses() {
        return MISSES.get();
    }

    public static long stored() {
        return STORED.get();
    }

    /** Cache files that could not be read, loaded or written (each then compiled, or not kept). */
    public static long failures() {
        return FAILURES.get();
    }

    /**
     * Called first by {@code ClassBodyEvaluator.cook(fileName, reader)}: null when the classes were found and loaded
     * into the evaluator (it then returns at once), else the reader to compile from.
     */
    public static Reader before(Object evaluator, String fileName, Reader reader) throws IOException {
        if (!enabled || !SPARK_FILE_NAME.equals(fileName)) {
            return reader;
        }
        String source = readAll(reader);
        String key;
        try {
            key = key(evaluator, source);
        } catch (ReflectiveOperationException | NoSuchAlgorithmException e) {
            FAILURES.incrementAndGet();
            return new StringReader(source);
        }
        Path file = directory.resolve(key + SUFFIX);
        Map<String, byte[]> classes = read(file);
        if (classes != null) {
            try {
                String name = (String) CLASS_NAME.get(evaluator);
                ClassLoader parent = (ClassLoader) PARENT.get(COMPILER.get(evaluator));
                Class<?> loaded = new Loader(classes, parent).loadClass(name);
                LOADED.put(evaluator, Collections.unmodifiableMap(classes));
                RESULT.set(evaluator, loaded);
                HITS.incrementAndGet();
                touch(file);
                return null;
            } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
                FAILURES.incrementAndGet();
                forget(file);
            }
        }
        MISSES.incrementAndGet();
        PENDING.put(evaluator, key);
        return new StringReader(source);
    }

    /** Called by {@code cook} as it returns after compiling: keeps the classes it made. */
    public static void after(Object evaluator) {
        String key = PENDING.remove(evaluator);
        if (key == null) {
            return;
        }
        try {
            write(directory.resolve(key + SUFFIX), ((ClassBodyEvaluator) evaluator).getBytecodes());
            STORED.incrementAndGet();
        } catch (IOException | RuntimeException e) {
            FAILURES.incrementAndGet();
        }
    }

    /** Called first by {@code getBytecodes()}: the classes of a hit, else null (Janino's own answer). */
    public static Map<String, byte[]> bytecodes(Object evaluator) {
        return LOADED.isEmpty() ? null : LOADED.get(evaluator);
    }

    private static String key(Object evaluator, String source)
            throws ReflectiveOperationException, NoSuchAlgorithmException {
        MessageDigest digest = MessageDigest.getInstance("SHA-256");
        StringBuilder head = new StringBuilder("kraft-replay codegen ").append(FORMAT).append('\n');
        head.append(CLASS_NAME.get(evaluator)).append('\n');
        Class<?> extended = (Class<?>) EXTENDED.get(evaluator);
        head.append(extended == null ? "" : extended.getName()).append('\n');
        Class<?>[] implemented = (Class<?>[]) IMPLEMENTED.get(evaluator);
        if (implemented != null) {
            for (Class<?> c : implemented) {
                head.append(c.getName()).append(',');
            }
        }
        head.append('\n');
        String[] imports = (String[]) IMPORTS.get(evaluator);
        if (imports != null) {
            for (String i : imports) {
                head.append(i).append(',');
            }
        }
        head.append('\n');
        digest.update(head.toString().getBytes(StandardCharsets.UTF_8));
        digest.update(source.getBytes(StandardCharsets.UTF_8));
        StringBuilder hex = new StringBuilder();
        for (byte b : digest.digest()) {
            hex.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return hex.toString();
    }

    private static String readAll(Reader reader) throws IOException {
        StringWriter out = new StringWriter();
        reader.transferTo(out);
        return out.toString();
    }

    /** The classes in `file`, or null when there is none or it is not whole (then it is removed). */
    private static Map<String, byte[]> read(Path file) {
        byte[] bytes;
        try {
            bytes = Files.readAllBytes(file);
        } catch (NoSuchFileException e) {
            return null;
        } catch (IOException e) {
            FAILURES.incrementAndGet();
            return null;
        }
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
            if (in.readInt() != FORMAT) {
                throw new IOException("another format");
            }
            int count = in.readInt();
            Map<String, byte[]> classes = new HashMap<>();
            for (int i = 0; i < count; i++) {
                String name = in.readUTF();
                byte[] code = new byte[in.readInt()];
                in.readFully(code);
                classes.put(name, code);
            }
            if (in.read() != -1 || classes.isEmpty()) {
                throw new IOException("trailing or no classes");
            }
            return classes;
        } catch (IOException | RuntimeException e) {
            FAILURES.incrementAndGet();
            forget(file);
            return null;
        }
    }

    /** Writes the classes next to `file` and moves them into place, so a reader never sees part of a file. */
    private static void write(Path file, Map<String, byte[]> classes) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(FORMAT);
            out.writeInt(classes.size());
            for (Map.Entry<String, byte[]> e : new TreeMap<>(classes).entrySet()) {
                out.writeUTF(e.getKey());
                out.writeInt(e.getValue().length);
                out.write(e.getValue());
            }
        }
        Path partial = file.resolveSibling(file.getFileName() + "." + ThreadLocalRandom.current().nextLong() + ".tmp");
        Files.write(partial, bytes.toByteArray());
        try {
            Files.move(partial, file, StandardCopyOption.ATOMIC_MOVE);
        } catch (AtomicMoveNotSupportedException e) {
            Files.move(partial, file, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            Files.deleteIfExists(partial);
        }
    }

    /** Marks a file as used now: the Python side removes the least recently used ones when the cache grows. */
    private static void touch(Path file) {
        try {
            Files.setLastModifiedTime(file, FileTime.fromMillis(System.currentTimeMillis()));
        } catch (IOException e) {
            // a file another driver just removed: it was read whole already
        }
    }

    private static void forget(Path file) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException e) {
            // another driver's turn to try
        }
    }

    /** Defines the cached classes (and only those) itself; everything else comes from Spark's class loader. */
    private static final class Loader extends ClassLoader {
        private final Map<String, byte[]> classes;

        Loader(Map<String, byte[]> classes, ClassLoader parent) {
            super(parent);
            this.classes = Objects.requireNonNull(classes);
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (!classes.containsKey(name)) {
                return super.loadClass(name, resolve);
            }
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c == null) {
                    byte[] code = classes.get(name);
                    c = defineClass(name, code, 0, code.length);
                }
                if (resolve) {
                    resolveClass(c);
                }
                return c;
            }
        }
    }
}
