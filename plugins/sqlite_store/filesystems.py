"""Which filesystem a database lives on, and whether WAL is safe there.

WAL needs a shared-memory file that every process maps; network filesystems
(NFS, SMB/CIFS, 9p, ...) and most FUSE filesystems do not provide coherent
shared memory, so on those the store falls back to a rollback journal.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: Filesystem types on which WAL mode is not safe.
WAL_UNSAFE_TYPES = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb",
        "smb2",
        "smb3",
        "smbfs",
        "9p",
        "afs",
        "ceph",
        "glusterfs",
        "lustre",
        "gpfs",
        "ocfs2",
        "gfs2",
        "davfs",
        "virtiofs",
        "vboxsf",
        "vmhgfs",
        "prl_fs",
    }
)
#: FUSE types known to be local block filesystems (WAL works there).
_LOCAL_FUSE = frozenset({"fuseblk"})

_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    return _OCTAL.sub(lambda match: chr(int(match.group(1), 8)), field)


def mount_for(path: Path, mounts_text: str) -> tuple[str, str] | None:
    """The ``(mount point, fs type)`` holding ``path`` according to a mount table.

    ``mounts_text`` is in ``/proc/self/mounts`` format; the longest mount
    point that is a prefix of ``path`` wins.
    """
    target = str(path)
    best: tuple[str, str] | None = None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point, fstype = _unescape(fields[1]), fields[2]
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fstype)
    return best


def wal_unsafe_reason(path: Path, mounts_text: str | None = None) -> str | None:
    """Why WAL should not be used for a database at ``path``, or ``None``.

    Reads ``/proc/self/mounts`` unless ``mounts_text`` is given; on systems
    without a mount table nothing is known and ``None`` is returned.
    """
    if mounts_text is None:
        try:
            mounts_text = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    resolved = Path(os.path.realpath(path.parent)) / path.name
    found = mount_for(resolved, mounts_text)
    if found is None:
        return None
    point, fstype = found
    base = fstype.split(".", 1)[0]
    if fstype in WAL_UNSAFE_TYPES or base in WAL_UNSAFE_TYPES:
        return f"{resolved} is on a {fstype} filesystem mounted at {point}"
    if fstype.startswith("fuse") and fstype not in _LOCAL_FUSE:
        return f"{resolved} is on a FUSE filesystem ({fstype}) mounted at {point}"
    return None
