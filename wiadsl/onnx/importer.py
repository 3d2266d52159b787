"""Import ONNX models: ONNX graph -> WIA DSL source -> the normal compiler.

Design: the importer writes WIA DSL text (one kernel per graph) and hands it to
the frontend, so an imported model is checked, lowered, optimized and compiled
exactly as hand-written source is, and ``wiac model.onnx --emit wia`` shows
what was imported. Large initializers are not written as literals: they become
kernel inputs (*weights*, named ``w*``) that ``load_onnx`` binds on every call.

    imported = import_onnx("model.onnx", dims={"batch": 1})
    print(imported.source)                      # the WIA DSL kernel
    mod = wiadsl.load_onnx("model.onnx", target="cpu")
    y = mod(x)  # or mod.<kernel>(x), or by ONNX input name: mod(input=x)

Invariants:
- Every node is translated by the op table (``wiadsl.onnx.ops``) or the import
  fails with an ``OnnxImportError`` naming the op, its node and the opset; no
  node is skipped (Identity/Dropout are translated, as aliases).
- Symbolic dims (``dim_param``, or unnamed dynamic dims) become kernel dim names;
  ``dims`` fixes some of them at import time (then shape arithmetic on them folds).
- The kernel's inputs are the graph inputs (those not initialized), in order,
  then the weights; its outputs are the graph outputs, in order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..dtypes import DType
from . import proto as pb
from .graph import (
    ONNX_DTYPES,
    ONNX_TYPE_NAMES,
    Emitter,
    Node,
    OnnxImportError,
    Val,
    const_val,
)
from .imported import ImportedModel
from .ops import OPS, Translator
from .ops.nn import LAYOUT_OPS, READS_SHIFTED
from .shapes import Dim, substitute
from .storage import HELD, UINT8, boundary_numpy, converts_results, finish_outputs, prepare_inputs
from .symbolic import SYMBOLIC
from .text import LiteralError

if TYPE_CHECKING:
    from .import_cache import Digest

ModelLike = Any  # a path, bytes, or an onnx.ModelProto
#: Initializers up to this many elements are written as array literals.
INLINE_LIMIT = 16


def load_model(model: ModelLike, file_bytes: bytes | None = None) -> tuple[pb.Model, bool]:
    """The model of a path, serialized bytes or an ``onnx.ModelProto`` (read from its
    encoding by proto.py, the onnx package is not imported), and whether a tensor of
    it was stored in another file (it is read too, from beside the model).
    ``file_bytes``: the bytes of the file at path ``model``, already read."""
    folder = None
    if isinstance(model, (bytes, bytearray, memoryview)):
        data, where = bytes(model), "the model bytes"
    elif hasattr(model, "SerializeToString"):  # an onnx.ModelProto: its tensors are loaded
        data, where = model.SerializeToString(), "the ModelProto"
    else:
        path = os.fspath(model)
        try:
            if file_bytes is None:
                with open(path, "rb") as f:
                    file_bytes = f.read()
        except OSError as exc:
            raise OnnxImportError(f"cannot read ONNX model '{path}': {exc.strerror or exc}") from None
        data, folder, where = file_bytes, os.path.dirname(path), f"'{path}'"
    try:
        parsed = pb.parse_model(data)
        external = any(t.data_location == pb.EXTERNAL and t.raw_data is None
                       for t in pb.tensors(parsed))
        if external and folder is not None:
            pb.load_external(parsed, folder)
    except pb.ProtoError as exc:
        raise OnnxImportError(f"{where} is not an ONNX model: {exc}") from None
    except OSError as exc:
        raise OnnxImportError(f"{where}: cannot read its external data: {exc.strerror or exc}") from None
    return parsed, external


def tensor_array(t: pb.Tensor) -> Any:
    """The NumPy array of a tensor of the model; OnnxImportError if its data is malformed."""
    try:
        return pb.to_array(t)
    except pb.ProtoError as exc:
        raise OnnxImportError(str(exc)) from None


def default_opset(model: Any) -> int:
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    raise OnnxImportError("the model imports no version of the default ONNX opset")


class _Importer:
    def __init__(self, model: Any, dims: Mapping[str, int], inline_limit: int):
        self.model, self.graph = model, model.graph
        self.opset = default_opset(model)
        self.fixed = dict(dims)
        self.em = Emitter(inline_limit)
        self.values: dict[str, Val] = {}
        self.dim_names: dict[str, str] = {}
        self.seen_dims: set[str] = set()  # ONNX and DSL spellings of symbolic dims

    def run(self, kernel: str | None) -> ImportedModel:
        for init in self.graph.initializer:
            self.values[init.name] = const_val(tensor_array(init), hint=init.name)
        inputs = [(i.name, self._input(i)) for i in self.graph.input
                  if i.name not in self.values]
        unknown = sorted(set(self.fixed) - self.seen_dims)
        if unknown:
            raise OnnxImportError(f"dims {unknown} are not dims of the model's inputs "
                                  f"(its dims: {', '.join(sorted(self.seen_dims)) or 'none'})")
        for out in self.graph.output:
            self.em.reserve_output(out.name)
        for proto in self.graph.node:
            self._node(proto)
        outputs, boundary = [], {}
        for out in self.graph.output:
            v = self._graph_output(out)
            try:
                outputs.append(self.em.finish_output(out.name, v))
            except LiteralError as err:
                raise OnnxImportError(f"graph output '{out.name}': {err}") from None
            boundary[self.em.outputs[out.name]] = boundary_numpy(v)
        boundary.update({v.ref or "": boundary_numpy(v) for _, v in inputs})
        name = self.em.names.fresh(kernel or self.graph.name or "model", keep=True)
        header = (f"Imported from ONNX graph '{self.graph.name}' (opset {self.opset}, "
                  f"producer '{self.model.producer_name}').\n"
                  f"Inputs w*: initializers bound by wiadsl.load_onnx ({len(self.em.weights)}).")
        return ImportedModel(
            self.em.source(name, header, outputs), name, self.opset,
            tuple((o, v.ref or "") for o, v in inputs),
            tuple((o.name, self.em.outputs[o.name]) for o in self.graph.output),
            dict(self.em.weights), {k: t for k, t in boundary.items() if t is not None})

    def _input(self, info: pb.ValueInfo) -> Val:
        t = None if info.type is None else info.type.tensor_type
        if t is None:
            raise OnnxImportError(f"graph input '{info.name}' is not a tensor")
        held = HELD.get(t.elem_type)
        if t.elem_type not in ONNX_DTYPES and held is None:
            kind = ONNX_TYPE_NAMES.get(t.elem_type, str(t.elem_type))
            raise OnnxImportError(f"graph input '{info.name}' has element type {kind}, "
                                  "which WIA DSL does not have")
        if t.shape is None:
            raise OnnxImportError(f"graph input '{info.name}' has no shape (rank unknown)")
        shape = tuple(self._dim(d, info.name, i) for i, d in enumerate(t.shape.dim))
        shape = substitute(shape, {self.dim_names.get(k, k): v for k, v in self.fixed.items()})
        v = self.em.declare_input(info.name, held.storage if held else ONNX_DTYPES[t.elem_type],
                                  shape)
        v.held = held
        self.values[info.name] = v
        return v

    def _dim(self, d: pb.Dimension, input_name: str, axis: int) -> Dim:
        if d.dim_value is not None:
            return Dim(int(d.dim_value))
        param = d.dim_param or f"{input_name}_{axis}"
        if param not in self.dim_names:
            self.dim_names[param] = self.em.names.fresh(param, keep=True)
        self.seen_dims |= {param, self.dim_names[param]}
        if param in self.fixed:
            return Dim(int(self.fixed[param]))
        return Dim(1, (self.dim_names[param],))

    def _graph_output(self, info: pb.ValueInfo) -> Val:
        """Graph output ``info``, with quantized uint8 moved to its held form; its element
        type must be the one the graph declares (where it declares one)."""
        v = self._value(info.name, "graph output")
        if v.offset:
            v = self.em.bind(f"cast({self.em.ref(v)}, i32) + {v.offset}", DType.I32, v.shape,
                             "u8")
            v.held = UINT8
        declared = info.type.tensor_type.elem_type if info.type and info.type.tensor_type else 0
        held = HELD.get(declared)
        if declared and (held is not v.held or held is None and ONNX_DTYPES.get(declared)
                         not in (None, v.dtype)):
            got = v.held.name if v.held else str(v.dtype)
            raise OnnxImportError(f"graph output '{info.name}' is declared "
                                  f"{ONNX_TYPE_NAMES.get(declared, declared)}, but its "
                                  f"value here is {got}")
        return v

    def _value(self, name: str, what: str) -> Val:
        if name not in self.values:
            raise OnnxImportError(f"{what} '{name}' is used before it is defined "
                                  "(the graph is not topologically sorted)")
        return self.values[name]

    def _node(self, proto: pb.Node) -> None:
        vals = [self._value(i, f"input of node '{proto.name}'") if i else None
                for i in proto.input]
        node = Node(proto, self.opset, self.em, list(vals))  # (inputs as read: ``storage``)
        if proto.domain not in ("", "ai.onnx"):
            raise node.fail(f"domain '{proto.domain}' is not supported")
        translate = OPS.get(proto.op_type)
        if translate is None:
            raise node.fail("this op is not supported")
        prepare_inputs(node, READS_SHIFTED)
        reserved = {o: self.em.outputs.pop(o) for o in proto.output
                    if o in self.em.outputs and converts_results(node, vals)}
        try:
            outs = self._translate(node, translate, node.vals)
        except LiteralError as err:
            raise node.fail(str(err)) from None
        finally:
            self.em.outputs.update(reserved)
        outs = finish_outputs(node, vals, outs)
        wanted = [o for o in proto.output if o]
        if len(outs) < len(proto.output) and len(wanted) > len(outs):
            raise node.fail(f"only {len(outs)} of its outputs are supported")
        for name, v in zip(proto.output, outs):
            if name:
                if proto.op_type in LAYOUT_OPS and vals[0] is not None:
                    v.offset = vals[0].offset
                self.values[name] = v


    @staticmethod
    def _translate(node: Node, translate: Translator, vals: list[Val | None]) -> list[Val]:
        """Shape values (``Val.sym``) go to the symbolic evaluator, except as the
        shape input of the ops that read them as extents (``SHAPE_INPUT``)."""
        symbolic = [i for i, v in enumerate(vals) if v is not None and v.sym is not None]
        if set(symbolic) <= set(SHAPE_INPUT.get(node.op, ())):
            return translate(node)
        data = [v for v in vals if v is not None and v.sym is None and v.const is None]
        if node.op in SYMBOLIC and not data:
            return SYMBOLIC[node.op](node)
        if not data:
            raise node.fail("a shape value with symbolic extents (from Shape of a tensor "
                            "with dynamic dims) reaches this op; fix the dims at import")
        # a shape value meets run-time data (a mask built from the sequence length):
        # it becomes a value of the kernel, read from the inputs' extents
        for i in symbolic:
            node.vals[i] = node.em.shape_tensor(vals[i])  # type: ignore[arg-type]
        return translate(node)


#: op -> the inputs it reads as lists of extents (a symbolic shape value is fine there)
SHAPE_INPUT = {"Reshape": (1,), "Expand": (1,), "ConstantOfShape": (0,), "Slice": (2,)}


def supported_ops() -> list[str]:
    """The ONNX ops (default domain) the importer translates, sorted."""
    return sorted(OPS)


def import_onnx(model: ModelLike, dims: Mapping[str, int] | None = None, *,
                kernel: str | None = None, inline_limit: int = INLINE_LIMIT,
                store_later: bool = False) -> ImportedModel:
    """Translate ``model`` (path, bytes or ModelProto) into a WIA DSL kernel; a model
    file or bytes imported before comes from the import cache (import_cache.py). With
    ``store_later`` the new entry is written on a background thread (``load_onnx``:
    the compile goes on meanwhile)."""
    from . import import_cache

    digest, data = _digest(model)
    if isinstance(digest, bytes):  # known without reading the model (a file's memo)
        key = import_cache.model_key(digest, dims, kernel, inline_limit)
        found = None if key is None else import_cache.load(key)
        if found is not None:
            return found
    proto, external = load_model(model, data)
    imported = _Importer(proto, dims or {}, inline_limit).run(kernel)
    hashed = callable(digest)  # meanwhile: the same bytes may have been imported before
    digest = None if digest is None else import_cache.digest_value(digest)
    key = None if digest is None else import_cache.model_key(digest, dims, kernel, inline_limit)
    if key is not None and not external and not (hashed and import_cache.stored(key)):
        if store_later:  # (its bytes do not identify another file's tensors)
            import_cache.store_in_background(key, imported)
        else:
            import_cache.store(key, imported)
    return imported


def _digest(model: ModelLike) -> tuple[Digest | None, bytes | None]:
    """SHA-256 of the bytes ``model`` was given as or is stored in, None for a
    ModelProto (or a path that cannot be read: ``load_model`` reports it); and the
    file's bytes if they were read to hash them. Bytes read or given are hashed on a
    thread beside the import (import_cache.digest_beside)."""
    from . import import_cache

    if isinstance(model, (bytes, bytearray)):
        return import_cache.digest_beside(bytes(model)), None
    if isinstance(model, (str, os.PathLike)):
        try:
            return import_cache.read_and_digest(os.fspath(model))
        except OSError:
            return None, None
    return None, None


def onnx_to_source(model: ModelLike, dims: Mapping[str, int] | None = None, *,
                   inline_limit: int = INLINE_LIMIT) -> str:
    """The WIA DSL source of ``model`` (``wiac model.onnx --emit wia``)."""
    return import_onnx(model, dims, inline_limit=inline_limit).source


def load_onnx(model: ModelLike, target: str | None = None,
              dims: Mapping[str, int] | None = None, **options: Any) -> Any:
    """Import and compile ``model``; an ``OnnxModule`` (a ``wiadsl.jit``-style Module)."""
    from .module import compile_imported

    return compile_imported(import_onnx(model, dims, store_later=True), target, options)
