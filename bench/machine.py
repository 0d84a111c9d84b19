"""The machine description every benchmark report carries (shared by run.py and dcp_bench.py)."""
import os
import platform
import shutil
from pathlib import Path


def read_first(path, default=""):
    """The file's text, stripped; default when it cannot be read."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def machine_info() -> dict:
    cpu_model = ""
    for line in read_first("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    mem_total = 0
    for line in read_first("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem_total = int(line.split()[1]) * 1024
    shm = shutil.disk_usage("/dev/shm") if os.path.isdir("/dev/shm") else None
    return {
        "hostname": platform.node(),
        "nproc": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model,
        "ram_bytes": mem_total,
        "kernel": platform.release(),
        "dev_shm_bytes": shm.total if shm else 0,
        "dev_shm_free_bytes": shm.free if shm else 0,
        "thp_anon": read_first("/sys/kernel/mm/transparent_hugepage/enabled"),
        "thp_shmem": read_first("/sys/kernel/mm/transparent_hugepage/shmem_enabled"),
        "python": platform.python_version(),
        "loadavg_at_start": list(os.getloadavg()),
    }
