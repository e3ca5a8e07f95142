"""Load an x86-64 ELF relocatable object (what LLVM emits for a numba kernel) into
executable memory and link it against addresses we supply.

This is the part of a JIT linker that numba's cached kernels need: lay out the
allocatable sections, give COMMON symbols storage, resolve undefined symbols through
a callback, apply the relocations, then make the code pages read+execute. numba
compiles with LLVM's large code model, so its objects use absolute 64-bit relocations
(R_X86_64_64) and PC-relative 64-bit ones in .eh_frame; the 32-bit PC-relative and GOT
forms are handled too (through stubs and GOT slots in the same mapping), anything else
raises `ObjectLoadError` and the caller falls back to numba's own loader.

Layouts follow the System V gABI (ELF-64 object file format) and the x86-64 psABI,
section 4.4 (relocation types and their calculations).
"""

from __future__ import annotations

import ctypes
import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

_EHDR: Final = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR: Final = struct.Struct("<IIQQQQIIQQ")
_SYM: Final = struct.Struct("<IBBHQQ")
_RELA: Final = struct.Struct("<QQq")

EM_X86_64: Final = 62
ET_REL: Final = 1
SHT_SYMTAB, SHT_RELA, SHT_NOBITS = 2, 4, 8
SHT_X86_64_UNWIND: Final = 0x70000001  # .eh_frame: only an unwinder reads it
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
STT_SECTION: Final = 3
STB_WEAK: Final = 2

R_64, R_PC32, R_PLT32, R_GOTPCREL, R_32, R_32S = 1, 2, 4, 9, 10, 11
R_PC64, R_GOTOFF64, R_GOTPC32, R_GOTPC64 = 24, 25, 26, 29
R_GOTPCRELX, R_REX_GOTPCRELX = 41, 42
_GOT_TYPES: Final = (R_GOTPCREL, R_GOTPCRELX, R_REX_GOTPCRELX)
_PAGE: Final = mmap.PAGESIZE
# jmp qword ptr [rip+0] followed by the 8-byte target: reaches any address and, unlike
# a movabs/jmp-register pair, clobbers no register (rax carries a variadic call's
# vector-register count).
_STUB_HEAD: Final = b"\xff\x25\x00\x00\x00\x00"
_STUB_SIZE: Final = 16


class ObjectLoadError(Exception):
    """The object uses something this loader does not implement, or a symbol it
    needs is unknown: the caller should load the kernel another way."""


@dataclass
class LoadedObject:
    """An object linked into its own mapping; `symbols` are the defined global names."""

    memory: mmap.mmap
    base: int
    symbols: dict[str, int]

    def address(self, name: str) -> int:
        try:
            return self.symbols[name]
        except KeyError:
            raise ObjectLoadError(f"symbol {name!r} is not defined by the object") from None


@dataclass
class _Section:
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int


def _cstr(table: bytes, at: int) -> str:
    return table[at : table.index(b"\0", at)].decode()


def _sections(code: bytes) -> list[_Section]:
    if len(code) < _EHDR.size or code[:4] != b"\x7fELF":
        raise ObjectLoadError("not an ELF file")
    ident, etype, machine, *_, shoff, _flags, _eh, _ph, _phn, shentsize, shnum, shstrndx = (
        _EHDR.unpack_from(code)
    )
    if ident[4] != 2 or ident[5] != 1 or machine != EM_X86_64 or etype != ET_REL:
        raise ObjectLoadError("not a little-endian x86-64 relocatable ELF-64 object")
    raw = [_SHDR.unpack_from(code, shoff + i * shentsize) for i in range(shnum)]
    names = code[raw[shstrndx][4] : raw[shstrndx][4] + raw[shstrndx][5]]
    return [
        _Section(_cstr(names, n), t, f, off, size, link, info, max(align, 1), ent)
        for n, t, f, _addr, off, size, link, info, align, ent in raw
    ]


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


class _Layout:
    """Offsets of everything that takes memory, in three page-aligned groups:
    code (r-x), read-only data (r--), writable data (rw-)."""

    def __init__(self) -> None:
        self.groups: list[list[tuple[str, int, int]]] = [[], [], []]  # (what, size, align)

    def add(self, group: int, what: str, size: int, align: int) -> None:
        self.groups[group].append((what, size, align))

    def place(self) -> tuple[dict[str, int], list[tuple[int, int]], int]:
        offsets: dict[str, int] = {}
        spans: list[tuple[int, int]] = []
        at = 0
        for items in self.groups:
            start = at
            for what, size, align in items:
                at = _align(at, align)
                offsets[what] = at
                at += size
            at = _align(at, _PAGE)
            spans.append((start, at))
        return offsets, spans, max(at, _PAGE)


def load_object(code: bytes, resolve: Callable[[str], int | None]) -> LoadedObject:
    """Link `code` (ELF relocatable bytes) into fresh memory; `resolve(name)` gives the
    address of an undefined symbol, or None when it is unknown (an error unless the
    reference is weak)."""
    secs = _sections(code)
    symtab = next((s for s in secs if s.type == SHT_SYMTAB), None)
    if symtab is None:
        raise ObjectLoadError("object has no symbol table")
    strtab = code[secs[symtab.link].offset : secs[symtab.link].offset + secs[symtab.link].size]
    syms = [
        _SYM.unpack_from(code, symtab.offset + i * _SYM.size)
        for i in range(symtab.size // _SYM.size)
    ]
    loaded = {
        i
        for i, s in enumerate(secs)
        if s.flags & SHF_ALLOC and s.type != SHT_X86_64_UNWIND and s.size
    }
    relas = [s for s in secs if s.type == SHT_RELA and s.info in loaded]

    layout = _Layout()
    for i in sorted(loaded):
        s = secs[i]
        group = 0 if s.flags & SHF_EXECINSTR else 2 if s.flags & SHF_WRITE else 1
        layout.add(group, f"s{i}", s.size, s.align)
    for k, (_n, _info, _o, shndx, value, size) in enumerate(syms):
        if shndx == SHN_COMMON:
            layout.add(2, f"c{k}", size, max(value, 1))  # a COMMON symbol's value is its alignment
    got_syms: list[int] = []
    stub_syms: list[int] = []
    for rs in relas:
        for j in range(rs.size // _RELA.size):
            _off, info, _add = _RELA.unpack_from(code, rs.offset + j * _RELA.size)
            sym, rtype = info >> 32, info & 0xFFFFFFFF
            if rtype in _GOT_TYPES and sym not in got_syms:
                got_syms.append(sym)
            elif rtype in (R_PC32, R_PLT32) and syms[sym][3] == SHN_UNDEF and sym not in stub_syms:
                stub_syms.append(sym)
    for sym in stub_syms:
        layout.add(0, f"p{sym}", _STUB_SIZE, 16)
    layout.add(2, "got", 8 * len(got_syms), 8)
    offsets, spans, total = layout.place()

    memory = mmap.mmap(
        -1,
        total,
        flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
        prot=mmap.PROT_READ | mmap.PROT_WRITE,
    )
    base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    image = bytearray(total)
    for i in loaded:
        s = secs[i]
        if s.type != SHT_NOBITS:
            at = offsets[f"s{i}"]
            image[at : at + s.size] = code[s.offset : s.offset + s.size]

    def section_base(shndx: int) -> int:
        if shndx not in loaded:
            raise ObjectLoadError(f"relocation against unloaded section {secs[shndx].name}")
        return base + offsets[f"s{shndx}"]

    addresses: list[int] = []
    symbols: dict[str, int] = {}
    for k, (name_at, info, _other, shndx, value, _size) in enumerate(syms):
        name = _cstr(strtab, name_at)
        if shndx == SHN_UNDEF:
            if k == 0:
                addresses.append(0)
                continue
            addr = resolve(name)
            if addr is None:
                if info >> 4 != STB_WEAK:
                    raise ObjectLoadError(f"unresolved symbol {name!r}")
                addr = 0
        elif shndx == SHN_ABS:
            addr = value
        elif shndx == SHN_COMMON:
            addr = base + offsets[f"c{k}"]
        elif info & 0xF == STT_SECTION:
            addr = section_base(shndx) if shndx in loaded else 0
        else:
            addr = section_base(shndx) + value if shndx in loaded else 0
        addresses.append(addr)
        if info >> 4 and shndx != SHN_UNDEF and name:  # global or weak definition
            symbols[name] = addr

    got = base + offsets["got"]
    got_slot = {sym: got + 8 * n for n, sym in enumerate(got_syms)}
    for sym, slot in got_slot.items():
        struct.pack_into("<Q", image, slot - base, addresses[sym])
    stub = {sym: base + offsets[f"p{sym}"] for sym in stub_syms}
    for sym, at in stub.items():
        image[at - base : at - base + 14] = _STUB_HEAD + struct.pack("<Q", addresses[sym])

    for rs in relas:
        target = section_base(rs.info)
        for j in range(rs.size // _RELA.size):
            off, info, addend = _RELA.unpack_from(code, rs.offset + j * _RELA.size)
            sym, rtype = info >> 32, info & 0xFFFFFFFF
            p = target + off
            s = addresses[sym]
            _apply(image, p - base, p, rtype, s, addend, got, got_slot.get(sym), stub.get(sym))

    memory.seek(0)
    memory.write(bytes(image))
    _protect(base, spans)
    return LoadedObject(memory, base, symbols)


def _apply(
    image: bytearray,
    at: int,
    p: int,
    rtype: int,
    s: int,
    a: int,
    got: int,
    slot: int | None,
    stub: int | None,
) -> None:
    """One relocation, as the psABI's table 4.9 computes it (S symbol, A addend,
    P place, G+GOT the symbol's GOT slot)."""
    if rtype == R_64:
        struct.pack_into("<Q", image, at, (s + a) & 0xFFFFFFFFFFFFFFFF)
    elif rtype == R_PC64:
        struct.pack_into("<q", image, at, s + a - p)
    elif rtype in (R_PC32, R_PLT32):
        _put32(image, at, (stub if stub is not None else s) + a - p, signed=True)
    elif rtype in _GOT_TYPES and slot is not None:
        _put32(image, at, slot + a - p, signed=True)
    elif rtype == R_GOTOFF64:
        struct.pack_into("<q", image, at, s + a - got)
    elif rtype == R_GOTPC64:
        struct.pack_into("<q", image, at, got + a - p)
    elif rtype == R_GOTPC32:
        _put32(image, at, got + a - p, signed=True)
    elif rtype == R_32:
        _put32(image, at, s + a, signed=False)
    elif rtype == R_32S:
        _put32(image, at, s + a, signed=True)
    else:
        raise ObjectLoadError(f"relocation type {rtype} is not supported")


def _put32(image: bytearray, at: int, value: int, *, signed: bool) -> None:
    lo, hi = (-(1 << 31), (1 << 31) - 1) if signed else (0, (1 << 32) - 1)
    if not lo <= value <= hi:
        raise ObjectLoadError(f"32-bit relocation out of range ({value:#x})")
    struct.pack_into("<i" if signed else "<I", image, at, value)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.mprotect.restype = ctypes.c_int


def _protect(base: int, spans: list[tuple[int, int]]) -> None:
    code, rodata, _data = spans
    for (start, end), prot in ((code, mmap.PROT_READ | mmap.PROT_EXEC), (rodata, mmap.PROT_READ)):
        if end > start and _libc.mprotect(base + start, end - start, prot) != 0:
            raise ObjectLoadError(f"mprotect failed (errno {ctypes.get_errno()})")
