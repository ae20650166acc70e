package kraftreplay.codegen;

import java.io.InputStream;
import java.lang.instrument.ClassDefinition;
import java.lang.instrument.Instrumentation;

/**
 * The Java agent that turns the generated-code cache on ({@code -javaagent:JAR=DIRECTORY}). Before the driver's main
 * method runs it loads Janino's {@code ClassBodyEvaluator} (Spark compiles its generated code with it) and redefines
 * it with two calls into {@link CodegenCache} added ({@link Patch}). A redefinition rather than a load-time
 * transformer: the JVM then never hands every other class it loads to the agent. Whatever goes wrong leaves Janino as
 * it was, with a line on standard error: the cache only saves time.
 */
public final class Agent {
    static final String EVALUATOR = "org.codehaus.janino.ClassBodyEvaluator";

    private Agent() {}

    public static void premain(String directory, Instrumentation inst) {
        try {
            ClassLoader loader = ClassLoader.getSystemClassLoader();
            Class<?> evaluator = Class.forName(EVALUATOR, false, loader);
            byte[] original;
            try (InputStream in = loader.getResourceAsStream(EVALUATOR.replace('.', '/') + ".class")) {
                if (in == null) {
                    throw new IllegalStateException(EVALUATOR + " has no class file on the class path");
                }
                original = in.readAllBytes();
            }
            CodegenCache.open(directory);
            inst.redefineClasses(new ClassDefinition(evaluator, Patch.apply(original)));
            CodegenCache.enable();
        } catch (Throwable e) {
            System.err.println("kraft-replay: the generated-code cache is off (" + e + ")");
        }
    }
}
