"""A durable filesystem that fails on demand: a FUSE passthrough (fusepy over Debian's libfuse2) of a
backing directory whose writes return EIO while the control file says so (issue 42 item 2).

    python faulty_fs.py BACKING MOUNT CONTROL      (foreground; unmount with `umount -l MOUNT`)

CONTROL is a plain file read before every operation that changes the filesystem (create, write,
truncate, mkdir, rename, link, unlink, rmdir, fsync, chmod, utimens): empty or absent = pass
through; "eio" = those operations fail with EIO, as a dying disk or a lost NFS server makes them;
reads and listings keep working, so what is already durable stays readable; "slow" = every read
of a file's bytes first sleeps 250 ms (a slow medium: a restore long enough to be killed in the
middle); "slow_writes" = every write of a file's bytes does (a persist long enough to be killed). The mount is private to the test (root only: mount(2)).

FaultyFs (below) starts and stops it from a test: `with FaultyFs(tmp_path) as fs: fs.fail("eio")`.
"""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

CHANGES = ("create", "write", "truncate", "mkdir", "rename", "link", "unlink", "rmdir", "fsync", "chmod",
           "utimens", "symlink")


def serve(backing: str, mount: str, control: str) -> None:
    from fuse import FUSE, FuseOSError, Operations  # noqa: PLC0415  (fusepy: only in the serving process)

    class Passthrough(Operations):
        def __init__(self):
            self.root = backing

        def _p(self, path):
            return os.path.join(self.root, path.lstrip("/"))

        def _mode(self):
            try:
                with open(control) as f:
                    return f.read().strip()
            except FileNotFoundError:
                return ""

        def _check(self):
            if self._mode() == "eio":
                raise FuseOSError(errno.EIO)

        def __call__(self, op, *args):
            if op in CHANGES:
                self._check()
            try:
                return super().__call__(op, *args)
            except OSError as e:
                if isinstance(e, FuseOSError):
                    raise
                raise FuseOSError(e.errno or errno.EIO) from e

        def access(self, path, mode):
            if not os.access(self._p(path), mode):
                raise FuseOSError(errno.EACCES)

        def chmod(self, path, mode):
            os.chmod(self._p(path), mode)

        def chown(self, path, uid, gid):
            os.chown(self._p(path), uid, gid)

        def getattr(self, path, fh=None):
            st = os.lstat(self._p(path))
            return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime",
                                                 "st_nlink", "st_size", "st_uid")}

        def readdir(self, path, fh):
            return [".", ".."] + os.listdir(self._p(path))

        def readlink(self, path):
            return os.readlink(self._p(path))

        def rmdir(self, path):
            os.rmdir(self._p(path))

        def mkdir(self, path, mode):
            os.mkdir(self._p(path), mode)

        def statfs(self, path):
            sv = os.statvfs(self._p(path))
            return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                 "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

        def unlink(self, path):
            os.unlink(self._p(path))

        def symlink(self, name, target):
            os.symlink(target, self._p(name))

        def rename(self, old, new):
            os.rename(self._p(old), self._p(new))

        def link(self, target, name):
            os.link(self._p(name), self._p(target))

        def utimens(self, path, times=None):
            os.utime(self._p(path), times)

        def open(self, path, flags):
            if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC):
                self._check()
            return os.open(self._p(path), flags)

        def create(self, path, mode, fi=None):
            return os.open(self._p(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

        def read(self, path, length, offset, fh):
            if self._mode() == "slow":
                time.sleep(0.25)
            return os.pread(fh, length, offset)

        def write(self, path, data, offset, fh):
            if self._mode() == "slow_writes":
                time.sleep(0.25)
            return os.pwrite(fh, data, offset)

        def truncate(self, path, length, fh=None):
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(self._p(path), length)

        def flush(self, path, fh):
            return 0

        def release(self, path, fh):
            os.close(fh)
            return 0

        def fsync(self, path, fdatasync, fh):
            os.fsync(fh)
            return 0

    FUSE(Passthrough(), mount, foreground=True, nothreads=False, allow_other=True, default_permissions=True)


class FaultyFs:
    """Mounts faulty_fs.py at tmp/mnt over tmp/backing for a test; fail("eio"), fail("slow") and
    fail("") switch it."""

    def __init__(self, tmp: Path):
        self.backing = tmp / "backing"
        self.mount = tmp / "mnt"
        self.control = tmp / "faulty_fs.mode"
        self.log = tmp / "faulty_fs.log"
        self.proc: subprocess.Popen | None = None

    def fail(self, mode: str) -> None:
        self.control.write_text(mode)

    def __enter__(self) -> "FaultyFs":
        self.backing.mkdir(parents=True)
        self.mount.mkdir(parents=True)
        self.fail("")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, __file__, str(self.backing), str(self.mount),
                                          str(self.control)], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not os.path.ismount(self.mount):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"faulty_fs did not mount {self.mount}: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run(["umount", "-l", str(self.mount)], check=False)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: faulty_fs.py BACKING MOUNT CONTROL")
    serve(*sys.argv[1:])
