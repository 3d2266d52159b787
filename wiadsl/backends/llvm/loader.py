"""Loading the object code LLVM emits into this process: a small ELF linker-loader.

Why our own: a warm process (issue 21) finds every kernel's object code in the
disk cache. Loading it with llvmlite's MCJIT meant importing ``llvmlite.binding``
(the LLVM shared library: 15-20 ms of a ~50 ms warm start) only to copy some bytes
and patch some addresses. The objects all come from one target machine
(target.py: static relocation model, JIT code model, which is the large code
model on x86-64), so what they ask of a loader is small and well defined:

- sections to place: code (``.text``, ``.ltext``), constants (``.rodata*``,
  ``.lrodata``), data and zeroed data (``.data``, ``.bss``, ``.lbss``); unwind
  tables (``.eh_frame``) are left out (nothing unwinds through kernels);
- relocations (System V x86-64 psABI, table 4.9): absolute 64-bit addresses
  (``R_X86_64_64``, nearly all of them), PC-relative ones within the object, and
  GOT loads (a GOT slot per symbol, placed beside the object's data);
- undefined symbols: the helpers and cells this process registered
  (``add_symbol``), else the process's own (libc's ``memset``, CPython's C API)
  through ``dlsym``.

Anything else (another object format or machine, thread-local or constructor
sections, an unknown relocation) is a ``LoadError`` naming it. Hosts other than
Linux x86-64 load through MCJIT instead (``NATIVE``), importing llvmlite then.

Invariants:
- Memory is mapped once per object and never unmapped (kernel code lives as long
  as the process, as MCJIT's did); code pages end up read + execute, never
  writable and executable at once.
- An object's own symbols resolve to its own definitions first, so two objects
  that define one name (the same cache key loaded twice) never mix; globals are
  added to the process table only when the name is new.
- The symbol table is changed under ``_LOCK``; loading holds it throughout, so a
  thread that finds a name finds the code behind it complete.

Profiling: with ``WIADSL_PERF_MAP=1`` every function of a loaded object (kernels,
their outlined parallel bodies, the helpers) is appended to ``/tmp/perf-<pid>.map``,
the file ``perf report`` reads to name code it finds in anonymous memory.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys
from collections.abc import Iterator
from typing import Any

from ...forking import child_safe_lock

PAGE = 4096
NATIVE = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")

_LOCK = child_safe_lock(globals(), "_LOCK")
#: name -> address of every helper, cell and global this process registered or loaded
_SYMBOLS: dict[str, int] = {}
_PROCESS = ctypes.CDLL(None, use_errno=True)
_MAPPINGS: list[tuple[int, int]] = []  # (address, bytes): kept for the process's life

# ELF constants (System V gABI; x86-64 psABI)
_SHF_WRITE, _SHF_ALLOC, _SHF_EXECINSTR, _SHF_TLS = 0x1, 0x2, 0x4, 0x400
_SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 2, 4, 8, 9
_SHT_INIT = {14, 15, 16}  # init/fini/preinit arrays: code that would have to run at load
_SHT_X86_64_UNWIND = 0x70000001
_SHN_UNDEF, _SHN_ABS, _SHN_COMMON = 0, 0xFFF1, 0xFFF2
_STB_LOCAL, _STB_WEAK, _STT_FUNC, _STT_SECTION = 0, 2, 2, 3
_R_NONE, _R_64, _R_PC32, _R_PLT32, _R_32, _R_32S, _R_PC64 = 0, 1, 2, 4, 10, 11, 24
_R_GOTPCREL = {9, 41, 42}  # GOTPCREL, GOTPCRELX, REX_GOTPCRELX
_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20


class LoadError(RuntimeError):
    """Object code this loader cannot place or link (what, and why)."""


class _Section:
    """One section header (plain slots: a warm start imports this module, and each
    dataclass costs ~0.3 ms to create)."""

    __slots__ = ("index", "name", "kind", "flags", "offset", "size", "link", "info", "align")

    def __init__(self, index: int, name: str, kind: int, flags: int, offset: int, size: int,
                 link: int, info: int, align: int):
        self.index, self.name, self.kind, self.flags = index, name, kind, flags
        self.offset, self.size, self.link, self.info, self.align = offset, size, link, info, align


class _Symbol:
    """One symbol table entry."""

    __slots__ = ("name", "bind", "kind", "section", "value", "size")

    def __init__(self, name: str, bind: int, kind: int, section: int, value: int, size: int):
        self.name, self.bind, self.kind = name, bind, kind
        self.section, self.value, self.size = section, value, size


class _Object:
    """The parts of one relocatable ELF64 little-endian x86-64 object."""

    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise LoadError("not a 64-bit little-endian ELF object")
        e_type, e_machine = struct.unpack_from("<HH", data, 16)
        if e_type != 1 or e_machine != 62:
            raise LoadError(f"not a relocatable x86-64 object (type {e_type}, machine {e_machine})")
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize) for k in range(shnum)]
        names = raw[shstrndx]
        self.data = data
        self.sections = [_Section(k, self._string(names[4], r[0]), r[1], r[2], r[4], r[5],
                                  r[6], r[7], max(1, r[8])) for k, r in enumerate(raw)]
        tables = [s for s in self.sections if s.kind == _SHT_SYMTAB]
        self.symbols = self._symbols(tables[0]) if tables else []

    def _string(self, table_offset: int, at: int) -> str:
        end = self.data.index(b"\0", table_offset + at)
        return self.data[table_offset + at:end].decode()

    def _entries(self, table: _Section, layout: str) -> Iterator[tuple[int, ...]]:
        """The fixed-size entries of ``table`` (``struct.iter_unpack``: a warm start
        parses every helper it loads, and one ``unpack_from`` per entry cost more)."""
        return struct.iter_unpack(layout, memoryview(self.data)[table.offset:table.offset + table.size])

    def _symbols(self, table: _Section) -> list[_Symbol]:
        strings = self.sections[table.link].offset
        return [_Symbol(self._string(strings, name), info >> 4, info & 0xF, shndx, value, size)
                for name, info, _, shndx, value, size in self._entries(table, "<IBBHQQ")]

    def relocations(self, table: _Section) -> Iterator[tuple[int, int, int, int]]:
        """(offset, type, symbol index, addend) of each entry of a RELA section."""
        for offset, info, addend in self._entries(table, "<QQq"):
            yield offset, info & 0xFFFFFFFF, info >> 32, addend


def _loaded(s: _Section) -> bool:
    """Sections placed in memory: allocated ones, less unwind tables."""
    if not s.flags & _SHF_ALLOC or s.kind == _SHT_X86_64_UNWIND or s.name == ".eh_frame":
        return False
    if s.flags & _SHF_TLS or s.kind in _SHT_INIT or s.name in (".ctors", ".dtors"):
        raise LoadError(f"section {s.name} needs a loader that runs code or sets up threads")
    if s.align > PAGE:  # a mapping starts page-aligned: no more than that is kept
        raise LoadError(f"section {s.name} asks for {s.align}-byte alignment (at most {PAGE})")
    return True


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class _Plan:
    """Where each loaded section, common symbol and GOT slot goes in one mapping."""

    __slots__ = ("at", "common", "got", "code_bytes", "size")

    def __init__(self, at: dict[int, int], common: dict[int, int], got: dict[int, int],
                 code_bytes: int, size: int):
        self.at = at                  #: section index -> offset
        self.common = common          #: symbol index -> offset
        self.got = got                #: symbol index -> offset of its GOT slot
        self.code_bytes = code_bytes  #: [0, code_bytes) holds code (read + execute once linked)
        self.size = size


def _plan(obj: _Object) -> _Plan:
    at: dict[int, int] = {}
    code = [s for s in obj.sections if _loaded(s) and s.flags & _SHF_EXECINSTR]
    data = [s for s in obj.sections if _loaded(s) and not s.flags & _SHF_EXECINSTR]
    end = 0
    for s in code:
        end = _align(end, s.align)
        at[s.index] = end
        end += s.size
    code_bytes = end = _align(end, PAGE)
    for s in data:
        end = _align(end, s.align)
        at[s.index] = end
        end += s.size
    common: dict[int, int] = {}
    for k, sym in enumerate(obj.symbols):
        if sym.section == _SHN_COMMON:  # st_value is the alignment
            end = _align(end, max(1, sym.value))
            common[k] = end
            end += sym.size
    got: dict[int, int] = {}
    for table in obj.sections:
        if table.kind == _SHT_RELA and table.info in at:
            for _, kind, sym_index, _ in obj.relocations(table):
                if kind in _R_GOTPCREL and sym_index not in got:
                    end = _align(end, 8)
                    got[sym_index] = end
                    end += 8
    return _Plan(at, common, got, code_bytes, _align(max(end, 1), PAGE))


def _libc(name: str, restype: type, *argtypes: type) -> Any:
    fn = getattr(_PROCESS, name)
    fn.restype, fn.argtypes = restype, list(argtypes)
    return fn


_mmap = _libc("mmap", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
              ctypes.c_int, ctypes.c_int, ctypes.c_long)
_mprotect = _libc("mprotect", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def _map(size: int) -> int:
    address = _mmap(None, size, _PROT_READ | _PROT_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS, -1, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        raise LoadError(f"cannot map {size} bytes for code (errno {ctypes.get_errno()})")
    _MAPPINGS.append((address, size))
    return int(address)


def _protect(address: int, size: int, prot: int) -> None:
    if size and _mprotect(address, size, prot) != 0:
        raise LoadError(f"cannot make loaded code executable (mprotect errno {ctypes.get_errno()})")


def process_symbol(name: str) -> int | None:
    """The address of ``name``: one registered here, else the process's own (dlsym)."""
    if name in _SYMBOLS:
        return _SYMBOLS[name]
    try:
        return ctypes.cast(_PROCESS[name], ctypes.c_void_p).value
    except AttributeError:
        return None


def add_symbol(name: str, address: int) -> None:
    """Make ``name`` resolve to ``address`` in every object loaded from now on."""
    with _LOCK:
        _SYMBOLS[name] = address
    if not NATIVE:
        import llvmlite.binding as llvm

        llvm.add_symbol(name, address)


class _Linker:
    """Places one object in a fresh mapping and applies its relocations."""

    def __init__(self, obj: _Object):
        self.obj = obj
        self.plan = _plan(obj)
        self.base = _map(self.plan.size)
        self.memory = (ctypes.c_char * self.plan.size).from_address(self.base)
        self.defined: dict[str, int] = {}  # this object's globals (``address`` reads it)
        self.defined = {s.name: self.address(k) for k, s in enumerate(obj.symbols)
                        if s.bind != _STB_LOCAL and s.section != _SHN_UNDEF and s.name}

    def address(self, index: int) -> int:
        sym = self.obj.symbols[index]
        if sym.section == _SHN_ABS:
            return sym.value
        if sym.section == _SHN_COMMON:
            return self.base + self.plan.common[index]
        if sym.section != _SHN_UNDEF:
            if sym.section not in self.plan.at:
                raise LoadError(f"symbol '{sym.name}' is in a section that is not loaded")
            return self.base + self.plan.at[sym.section] + (0 if sym.kind == _STT_SECTION else sym.value)
        found = self.defined.get(sym.name)
        if found is None:
            found = process_symbol(sym.name)
        if found is None:
            if sym.bind == _STB_WEAK:
                return 0
            raise LoadError(f"undefined symbol '{sym.name}' (not registered, not in this process)")
        return found

    def copy_sections(self) -> None:
        for s in self.obj.sections:
            if s.index in self.plan.at and s.kind != _SHT_NOBITS:  # the mapping starts zeroed
                chunk = self.obj.data[s.offset:s.offset + s.size]
                ctypes.memmove(self.base + self.plan.at[s.index], chunk, len(chunk))

    def relocate(self) -> None:
        for table in self.obj.sections:
            if table.kind == _SHT_REL:
                raise LoadError(f"{table.name}: REL relocations are not used on x86-64")
            if table.kind != _SHT_RELA or table.info not in self.plan.at:
                continue
            start = self.plan.at[table.info]
            for offset, kind, sym_index, addend in self.obj.relocations(table):
                self.apply(start + offset, kind, sym_index, addend)

    def apply(self, at: int, kind: int, sym_index: int, addend: int) -> None:
        place = self.base + at
        if kind == _R_NONE:
            return
        if kind in _R_GOTPCREL:
            slot = self.plan.got[sym_index]
            struct.pack_into("<Q", self.memory, slot, self.address(sym_index))
            self.put32(at, self.base + slot + addend - place, signed=True, kind=kind)
            return
        value = self.address(sym_index) + addend
        if kind == _R_64:
            struct.pack_into("<Q", self.memory, at, value & (2 ** 64 - 1))
        elif kind == _R_PC64:
            struct.pack_into("<q", self.memory, at, value - place)
        elif kind in (_R_PC32, _R_PLT32):
            self.put32(at, value - place, signed=True, kind=kind)
        elif kind in (_R_32, _R_32S):
            self.put32(at, value, signed=kind == _R_32S, kind=kind)
        else:
            raise LoadError(f"relocation type {kind} is not one this loader applies")

    def put32(self, at: int, value: int, signed: bool, kind: int) -> None:
        lo, hi = (-(2 ** 31), 2 ** 31) if signed else (0, 2 ** 32)
        if not lo <= value < hi:
            raise LoadError(f"relocation type {kind}: {value:#x} does not fit 32 bits "
                            "(the object was not built for the JIT code model)")
        struct.pack_into("<i" if signed else "<I", self.memory, at, value)

    def finish(self) -> None:
        _protect(self.base, self.plan.code_bytes, _PROT_READ | _PROT_EXEC)

    def functions(self) -> Iterator[tuple[int, int, str]]:
        """(address, bytes, name) of each function the object defines, local ones too."""
        for k, sym in enumerate(self.obj.symbols):
            if sym.kind == _STT_FUNC and sym.size and sym.section in self.plan.at:
                yield self.address(k), sym.size, sym.name


_PERF_MAP_PIDS: set[int] = set()  # processes whose map this module has started


def _write_perf_map(linker: _Linker) -> None:
    """Name the object's functions for ``perf`` (its JIT map convention: one
    ``START SIZE name`` line per function, hexadecimal, in /tmp/perf-<pid>.map).
    A process's first write starts the file afresh: an earlier process with the same
    pid may have left one (a forked child gets its own pid, hence its own file)."""
    lines = "".join(f"{a:x} {n:x} {name}\n" for a, n, name in linker.functions())
    pid = os.getpid()
    with open(f"/tmp/perf-{pid}.map", "a" if pid in _PERF_MAP_PIDS else "w") as f:
        f.write(lines)
    _PERF_MAP_PIDS.add(pid)


def load(obj: bytes, symbol: str | None) -> int:
    """Load relocatable object code and return the address of its ``symbol`` (0 for
    None: a part of a kernel, partition.py); its other globals become visible to
    objects loaded later."""
    if not NATIVE:
        return _load_with_mcjit(obj, symbol)
    with _LOCK:
        linker = _Linker(_Object(obj))
        linker.copy_sections()
        linker.relocate()
        linker.finish()
        for name, address in linker.defined.items():
            _SYMBOLS.setdefault(name, address)
        if os.environ.get("WIADSL_PERF_MAP", "") not in ("", "0"):
            _write_perf_map(linker)
    if symbol is None:
        return 0
    if not linker.defined.get(symbol):
        raise LoadError(f"object code does not define '{symbol}'")
    return linker.defined[symbol]


def symbol_address(name: str) -> int:
    """The address of a global of a loaded object (or a registered name)."""
    if NATIVE:
        with _LOCK:
            address = _SYMBOLS.get(name, 0)
    else:
        from .target import engine

        address = engine().engine.get_function_address(name)
    if not address:
        raise LoadError(f"no loaded object defines '{name}'")
    return int(address)


def _load_with_mcjit(obj: bytes, symbol: str | None) -> int:
    from .target import engine

    return engine().add_object(obj, symbol)
