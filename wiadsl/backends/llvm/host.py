"""The CPU that code is built for: LLVM's name for it, its features, the triple.

LLVM names the host (``get_host_cpu_name`` / ``get_host_cpu_features``) and every
cache key carries that answer. Asking LLVM means importing ``llvmlite.binding``
(15-20 ms), which a warm process (issue 21) otherwise never needs. So the answer
is kept in the cache folder, ``host/<key>.idx``, under a key of what decides it:

- the CPU as the OS describes it: ``/proc/cpuinfo``'s vendor, family, model,
  stepping, model name and flags. LLVM derives the name from family and model and
  the features from CPUID, which the flags list (the kernel clears the flags of
  state the OS does not enable, as LLVM checks XCR0 for AVX and AVX-512);
- the llvmlite build (its version, its LLVM library's size and modification time),
  whose LLVM maps CPUID to names and features.

A record that is missing, damaged or for another key is a miss: LLVM is asked and
the record written. Off Linux (no ``/proc/cpuinfo``) LLVM is asked every time.
``WIADSL_ISA`` is applied on top of LLVM's answer (``restrict_features``), so it is
not part of the key. This module imports llvmlite only on a miss.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cache
from pathlib import Path

from ...cache.key import canonical, sha256
from ...cache.store import CorruptEntry, new_sha256, read, root, write
from ...diagnostics import WiaUsageError
from ...records import as_dict, record

#: The /proc/cpuinfo fields of the first processor that decide LLVM's answer.
CPUINFO_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags")
FORMAT = 2


@record(frozen=True)
class HostInfo:
    cpu: str
    features: str
    triple: str

    @property
    def avx512(self) -> bool:
        return "+avx512f" in self.features.split(",")

    @property
    def vector_bits(self) -> int:
        return 512 if self.avx512 else 256 if "+avx2" in self.features.split(",") else 128


@record(frozen=True)
class LlvmHost:
    """What LLVM says of this machine (before ``WIADSL_ISA``), and which LLVM (and
    llvmlite: a warm start reads its version here instead of importing it) said it."""

    cpu: str
    features: str
    triple: str
    llvm_version: str
    llvmlite_version: str


#: ``WIADSL_ISA`` levels below the host's own: the LLVM feature prefixes each turns off.
#: One machine can then build and run the code paths of the x86 hosts we support
#: (AMD AVX2; AVX-512 without VNNI; the host itself), as the tests need.
ISA_LEVELS: dict[str, tuple[str, ...]] = {
    "avx2": ("avx512", "avxvnni", "avxifma", "avxneconvert", "amx", "evex512", "avx10"),
    "avx512": ("avx512vnni", "avx512bf16", "avx512fp16", "avxvnni", "amx", "avx10"),
}


def restrict_features(features: str, level: str) -> str:
    """The host's LLVM ``features`` with those above ISA ``level`` turned off."""
    off = ISA_LEVELS[level]
    return ",".join("-" + f[1:] if f.startswith("+") and f[1:].startswith(off) else f
                    for f in features.split(","))


def _isa_level(features: str) -> str | None:
    level = os.environ.get("WIADSL_ISA", "").strip().lower()
    if level in ("", "native"):
        return None
    if level not in ISA_LEVELS:
        raise WiaUsageError(f"WIADSL_ISA={level!r} is not an ISA level; use one of "
                            f"{', '.join(ISA_LEVELS)} or native")
    if "+avx2" not in features.split(",") or \
            (level == "avx512" and "+avx512f" not in features.split(",")):
        raise WiaUsageError(f"WIADSL_ISA={level}: this host's CPU has no {level}")
    return level


def ask_llvm() -> LlvmHost:
    import llvmlite
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return LlvmHost(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(),
                    llvm.get_process_triple(), ".".join(map(str, llvm.llvm_version_info)),
                    llvmlite.__version__)


def cpu_description(cpuinfo: str) -> dict[str, str] | None:
    """The ``CPUINFO_FIELDS`` of the first processor in ``cpuinfo``'s text; None when
    any is missing (an unknown layout: ask LLVM)."""
    found: dict[str, str] = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() in CPUINFO_FIELDS:
            found[name.strip()] = " ".join(value.split())
    return found if len(found) == len(CPUINFO_FIELDS) else None


def _llvmlite_build() -> list[object] | None:
    spec = importlib.util.find_spec("llvmlite")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "binding"
    libraries = sorted(p for p in folder.iterdir() if p.name.startswith("libllvmlite"))
    if not libraries:
        return None
    version = (folder.parent / "_version.py").read_bytes()
    st = libraries[0].stat()
    return [new_sha256(version).hexdigest(), libraries[0].name, st.st_size, st.st_mtime_ns]


def _record_path() -> Path | None:
    """Where this machine's record lives, None when its key cannot be formed."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu = cpu_description(f.read(1 << 16))
        build = _llvmlite_build()
    except OSError:
        return None
    if cpu is None or build is None:
        return None
    return root() / "host" / f"{sha256(canonical([FORMAT, cpu, build]))}.idx"


def _read(path: Path) -> LlvmHost | None:
    try:
        entry = read(path.stem, path)
        return None if entry is None else LlvmHost(**entry.meta)
    except (OSError, CorruptEntry, TypeError):
        return None


@cache
def llvm_host() -> LlvmHost:
    """LLVM's answer for this machine, from its record when there is one."""
    path = _record_path()
    found = None if path is None else _read(path)
    if found is not None:
        return found
    found = ask_llvm()
    if path is not None:
        try:
            write(path.stem, as_dict(found), b"", path, durable=False)
        except OSError:
            pass  # the next process asks LLVM again
    return found


@cache
def host() -> HostInfo:
    """The CPU code is built for: this one, or (``WIADSL_ISA``) a lower ISA level of it."""
    found = llvm_host()
    features = found.features
    level = _isa_level(features)
    if level is not None:
        features = restrict_features(features, level)
    return HostInfo(found.cpu, features, found.triple)
