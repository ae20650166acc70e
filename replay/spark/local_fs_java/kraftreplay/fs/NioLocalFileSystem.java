package kraftreplay.fs;

import org.apache.hadoop.fs.LocalFileSystem;

/** `fs.file.impl`: Hadoop's local file system with checksum files, over {@link NioRawLocalFileSystem}. */
public class NioLocalFileSystem extends LocalFileSystem {
    public NioLocalFileSystem() {
        super(new NioRawLocalFileSystem());
    }
}
