"""Write the exported-model fixtures of tests/onnx/test_exports.py (not run by CI).

    python -m venv /tmp/venvtorch && /tmp/venvtorch/bin/pip install torch torchvision \\
        transformers onnxscript onnx
    /tmp/venvtorch/bin/python tests/onnx/exports/export.py

Each model is a stock architecture with random weights, exported by ``torch.onnx.export``
twice: by the TorchScript exporter (``dynamo=False``, opset 17, dynamic batch and
sequence axes) and by the dynamo exporter (``dynamo=True``, opset 18, the same axes as
``torch.export.Dim``s). To keep the files small (a few MB in all, committed gzipped):
ResNet-18 is torchvision's ResNet with its BasicBlocks at 1/8 of the width,
MobileNetV2 is torchvision's at ``width_mult=0.25``, BERT and GPT-2 are transformers'
with 2 layers, hidden size 128, 2 heads and a vocabulary of 128; every weight is
rounded to a multiple of 1/256 (random values on a grid compress, their graphs and
arithmetic are those of the real models). ``manifest.json`` records each file's inputs.
torch is never a dependency of the project or of its tests: the tests read the files.
"""

from __future__ import annotations

import gzip
import json
import sys
import warnings
from pathlib import Path

import torch
import torchvision
from torch import nn

HERE = Path(__file__).resolve().parent
warnings.filterwarnings("ignore")


def resnet18_narrow(width: int = 8, classes: int = 10) -> nn.Module:
    from torchvision.models.resnet import BasicBlock, ResNet
    m = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=classes)
    m.inplanes = width  # the same graph at 1/8 of the width
    m.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
    m.bn1 = nn.BatchNorm2d(width)
    m.layer1 = m._make_layer(BasicBlock, width, 2)
    m.layer2 = m._make_layer(BasicBlock, 2 * width, 2, stride=2)
    m.layer3 = m._make_layer(BasicBlock, 4 * width, 2, stride=2)
    m.layer4 = m._make_layer(BasicBlock, 8 * width, 2, stride=2)
    m.fc = nn.Linear(8 * width, classes)
    return m


def bert() -> nn.Module:
    from transformers import BertConfig, BertModel
    return BertModel(BertConfig(vocab_size=128, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=256, max_position_embeddings=32))


def gpt2() -> nn.Module:
    from transformers import GPT2Config, GPT2Model
    return GPT2Model(GPT2Config(vocab_size=128, n_embd=128, n_layer=2, n_head=2, n_inner=256, n_positions=32))


class LastHidden(nn.Module):
    """A transformers model returning ``last_hidden_state`` only (a plain tensor)."""

    def __init__(self, model: nn.Module, with_mask: bool):
        super().__init__()
        self.model, self.with_mask = model, with_mask

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        kwargs = {"attention_mask": mask} if self.with_mask else {}
        return self.model(input_ids=ids, **kwargs).last_hidden_state


def prepared(model: nn.Module) -> nn.Module:
    """Random batch-norm statistics (a fresh BatchNorm is the identity) and every
    parameter and buffer of floats on the 1/256 grid; eval mode."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.1, 0.1)
        for t in [*model.parameters(), *model.buffers()]:
            if t.is_floating_point():
                t.copy_(torch.round(t * 256) / 256)
    return model.eval()


#: name -> (model, example inputs, input names, dynamic axes: input -> {axis: name})
MODELS = {
    "resnet18": (lambda: resnet18_narrow(), lambda: (torch.randn(1, 3, 64, 64),), ["image"],
                 {"image": {0: "batch"}}),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(width_mult=0.25, num_classes=10),
                     lambda: (torch.randn(1, 3, 64, 64),), ["image"], {"image": {0: "batch"}}),
    "bert": (lambda: LastHidden(bert(), True),
             lambda: (torch.randint(0, 128, (2, 16)), torch.ones(2, 16, dtype=torch.int64)),
             ["input_ids", "attention_mask"],
             {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}),
    "gpt2": (lambda: LastHidden(gpt2(), False), lambda: (torch.randint(0, 128, (2, 16)),), ["input_ids"],
             {"input_ids": {0: "batch", 1: "seq"}}),
}


def export(name: str, exporter: str) -> bytes:
    make, example, inputs, dynamic = MODELS[name]
    torch.manual_seed(0)
    model, args = prepared(make()), example()
    path = Path("/tmp") / f"{name}_{exporter}.onnx"
    if exporter == "torchscript":
        torch.onnx.export(model, args, str(path), input_names=inputs, output_names=["output"],
                          dynamic_axes=dynamic, opset_version=17, dynamo=False)
    else:
        dims = {axis_name: torch.export.Dim(axis_name, min=1, max=32 if axis_name == "seq" else 64)
                for axes in dynamic.values() for axis_name in axes.values()}
        shapes = {arg: {axis: dims[n] for axis, n in dynamic[inp].items()}
                  for arg, inp in zip(_arg_names(model), inputs)}
        torch.onnx.export(model, args, str(path), input_names=inputs, output_names=["output"],
                          dynamic_shapes=shapes, opset_version=18, dynamo=True, external_data=False)
    return path.read_bytes()


def _arg_names(model: nn.Module) -> list[str]:
    """The names of ``forward``'s parameters (``dynamic_shapes`` is keyed by them)."""
    import inspect
    return list(inspect.signature(model.forward).parameters)


def main() -> int:
    manifest = {}
    for name, (_, example, inputs, dynamic) in MODELS.items():
        for exporter in ("torchscript", "dynamo"):
            data = export(name, exporter)
            file = f"{name}_{exporter}.onnx.gz"
            (HERE / file).write_bytes(gzip.compress(data, 9, mtime=0))
            args = example()
            manifest[file] = {"model": name, "exporter": exporter, "torch": torch.__version__,
                              "inputs": {n: {"dtype": str(a.dtype).removeprefix("torch."),
                                             "shape": list(a.shape), "dynamic": dynamic[n]}
                                         for n, a in zip(inputs, args)}}
            print(file, len(data), "bytes,", (HERE / file).stat().st_size, "gzipped", flush=True)
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
