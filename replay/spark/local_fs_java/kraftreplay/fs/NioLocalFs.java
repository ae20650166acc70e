package kraftreplay.fs;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * `fs.AbstractFileSystem.file.impl`, the local file system as `FileContext` sees it (Delta's commits rename
 * through it): checksum files over {@link NioRawLocalFileSystem}, answering as Hadoop's local one does.
 */
public class NioLocalFs extends ChecksumFs {
    public NioLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(new Raw(uri, conf));
    }

    /** The raw side, delegating to {@link NioRawLocalFileSystem}. */
    public static class Raw extends DelegateToFileSystem {
        public Raw(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(uri, new NioRawLocalFileSystem(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1;  // a local path has no port
        }

        @Override
        public FsServerDefaults getServerDefaults(Path f) throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        @Deprecated
        public FsServerDefaults getServerDefaults() throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public boolean isValidName(String src) {
            return true;  // any name the local file system takes
        }
    }
}
