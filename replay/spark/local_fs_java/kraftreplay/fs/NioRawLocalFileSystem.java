package kraftreplay.fs;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.FSLinkResolver;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's raw local file system, with permissions set and links read in this process. Without Hadoop's native
 * library the stock one starts a child process for every chmod and every readlink: a small ingest and replay
 * started about 550 of them, at about 2 ms each. Modes with bits beyond rwx (sticky, setuid) still go to chmod.
 */
public class NioRawLocalFileSystem extends RawLocalFileSystem {
    private static final PosixFilePermission[] BITS = {
        PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
        PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
        PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
        int mode = permission.toShort();
        if ((mode & ~0777) != 0) {
            super.setPermission(p, permission);
            return;
        }
        Set<PosixFilePermission> wanted = EnumSet.noneOf(PosixFilePermission.class);
        for (int bit = 0; bit < BITS.length; bit++) {
            if ((mode & (1 << bit)) != 0) {
                wanted.add(BITS[bit]);
            }
        }
        try {
            Files.setPosixFilePermissions(pathToFile(p).toPath(), wanted);
        } catch (NoSuchFileException e) {
            throw (FileNotFoundException) new FileNotFoundException("no such file to set permissions of: " + p)
                .initCause(e);
        }
    }

    /** As the stock one answers, without its readlink process: the link is looked up by the path's text. */
    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
        String target = linkTarget(f);
        FileStatus status;
        try {
            status = getFileStatus(f);
        } catch (FileNotFoundException e) {
            if (target.isEmpty()) {
                throw e;
            }
            status = new FileStatus(0, false, 0, 0, 0, 0, FsPermission.getDefault(), "", "", f);
        }
        if (target.isEmpty()) {
            return status;
        }
        FileStatus link = new FileStatus(status.getLen(), false, status.getReplication(), status.getBlockSize(),
            status.getModificationTime(), status.getAccessTime(), status.getPermission(), status.getOwner(),
            status.getGroup(), new Path(target), f);
        link.setSymlink(FSLinkResolver.qualifySymlinkTarget(getUri(), link.getPath(), link.getSymlink()));
        return link;
    }

    /** The target of a symbolic link named by the path's text, or "" (not a link, or not readable). */
    private static String linkTarget(Path f) {
        try {
            java.nio.file.Path named = new File(f.toString()).toPath();
            return Files.isSymbolicLink(named) ? Files.readSymbolicLink(named).toString() : "";
        } catch (IOException | InvalidPathException | SecurityException e) {
            return "";
        }
    }
}
