package kraftreplay.codegen;

import org.apache.xbean.asm9.ClassReader;
import org.apache.xbean.asm9.ClassVisitor;
import org.apache.xbean.asm9.ClassWriter;
import org.apache.xbean.asm9.Label;
import org.apache.xbean.asm9.MethodVisitor;
import org.apache.xbean.asm9.Opcodes;

/**
 * Janino's {@code ClassBodyEvaluator} with two calls added, and nothing else changed (a redefinition may change
 * method bodies only):
 * <ul>
 * <li>{@code cook(String, Reader)} first asks {@link CodegenCache#before}: on a hit the classes are already loaded and
 * it returns at once; otherwise it compiles the text it is given back, and before each return hands its classes to
 * {@link CodegenCache#after};</li>
 * <li>{@code getBytecodes()} first asks {@link CodegenCache#bytecodes}, which knows the classes of a hit (Spark reads
 * them to measure the code it compiled).</li>
 * </ul>
 */
final class Patch {
    private static final String CACHE = "kraftreplay/codegen/CodegenCache";
    private static final String OWNER = Agent.EVALUATOR.replace('.', '/');

    private Patch() {}

    static byte[] apply(byte[] original) {
        ClassReader reader = new ClassReader(original);
        ClassWriter writer = new ClassWriter(reader, ClassWriter.COMPUTE_MAXS);
        int[] patched = {0};
        reader.accept(new ClassVisitor(Opcodes.ASM9, writer) {
            @Override
            public MethodVisitor visitMethod(int access, String name, String desc, String signature,
                                             String[] exceptions) {
                MethodVisitor mv = super.visitMethod(access, name, desc, signature, exceptions);
                if (name.equals("cook") && desc.equals("(Ljava/lang/String;Ljava/io/Reader;)V")) {
                    patched[0]++;
                    return new Cook(mv);
                }
                if (name.equals("getBytecodes") && desc.equals("()Ljava/util/Map;")) {
                    patched[0]++;
                    return new Bytecodes(mv);
                }
                return mv;
            }
        }, ClassReader.EXPAND_FRAMES);
        if (patched[0] != 2) {
            throw new IllegalStateException("found " + patched[0] + " of the 2 methods to patch in " + OWNER);
        }
        return writer.toByteArray();
    }

    /** {@code reader = CodegenCache.before(this, fileName, reader); if (reader == null) return;} and the hand-over. */
    private static final class Cook extends MethodVisitor {
        Cook(MethodVisitor mv) {
            super(Opcodes.ASM9, mv);
        }

        @Override
        public void visitCode() {
            super.visitCode();
            Label compile = new Label();
            super.visitVarInsn(Opcodes.ALOAD, 0);
            super.visitVarInsn(Opcodes.ALOAD, 1);
            super.visitVarInsn(Opcodes.ALOAD, 2);
            super.visitMethodInsn(Opcodes.INVOKESTATIC, CACHE, "before",
                    "(Ljava/lang/Object;Ljava/lang/String;Ljava/io/Reader;)Ljava/io/Reader;", false);
            super.visitVarInsn(Opcodes.ASTORE, 2);
            super.visitVarInsn(Opcodes.ALOAD, 2);
            super.visitJumpInsn(Opcodes.IFNONNULL, compile);
            super.visitInsn(Opcodes.RETURN);
            super.visitLabel(compile);
            super.visitFrame(Opcodes.F_NEW, 3, new Object[] {OWNER, "java/lang/String", "java/io/Reader"}, 0,
                    new Object[0]);
        }

        @Override
        public void visitInsn(int opcode) {
            if (opcode == Opcodes.RETURN) {
                super.visitVarInsn(Opcodes.ALOAD, 0);
                super.visitMethodInsn(Opcodes.INVOKESTATIC, CACHE, "after", "(Ljava/lang/Object;)V", false);
            }
            super.visitInsn(opcode);
        }
    }

    /** {@code Map m = CodegenCache.bytecodes(this); if (m != null) return m;} */
    private static final class Bytecodes extends MethodVisitor {
        Bytecodes(MethodVisitor mv) {
            super(Opcodes.ASM9, mv);
        }

        @Override
        public void visitCode() {
            super.visitCode();
            Label own = new Label();
            super.visitVarInsn(Opcodes.ALOAD, 0);
            super.visitMethodInsn(Opcodes.INVOKESTATIC, CACHE, "bytecodes", "(Ljava/lang/Object;)Ljava/util/Map;",
                    false);
            super.visitInsn(Opcodes.DUP);
            super.visitJumpInsn(Opcodes.IFNULL, own);
            super.visitInsn(Opcodes.ARETURN);
            super.visitLabel(own);
            super.visitFrame(Opcodes.F_NEW, 1, new Object[] {OWNER}, 1, new Object[] {"java/util/Map"});
            super.visitInsn(Opcodes.POP);
        }
    }
}
