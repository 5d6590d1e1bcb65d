"""Where a model's weights live: one device, or a device map spanning several (accelerate's
`device_map`, passed to `from_pretrained`), and where its inputs go and its logits come out.

A map is "auto", "balanced", "balanced_low_0", "sequential" or an explicit JSON object
{module name: GPU index | "cpu" | "disk"} ("" names the whole model). Explicit maps are
checked against the model's module tree, built on the meta device (no weights read), before
anything loads. How dispatched models run: docs/distributed.md.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Union

import torch

from specdec.errors import SpecdecError
from specdec.strict_json import loads

STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
OFFLOAD = ("cpu", "disk")  # devices accelerate keeps weights on and moves to the GPU when a layer runs

DeviceMap = Union[str, dict[str, Any]]  # a strategy name or {module name: int | "cpu" | "disk"}


def parse_device_map(text: str) -> DeviceMap:
    """A strategy name, an inline JSON object or a .json file holding one -> a device map.

    Raises ValueError (one line) for anything else; GPU devices may be written 0 or "cuda:0".
    """
    text = text.strip()
    if text in STRATEGIES:
        return text
    if not text.startswith(("{", "[")):
        path = Path(text)
        if not path.is_file():
            raise SpecdecError(f"expected one of {', '.join(STRATEGIES)}, a JSON object or a .json file, got {text!r}")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecdecError(f"cannot read {str(path)!r}: {exc}") from None
    try:
        raw = loads(text)
    except json.JSONDecodeError as exc:
        raise SpecdecError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(raw, dict) or not raw:
        raise SpecdecError("a JSON device map must be a non-empty object {module name: device}")
    return {str(name): _device(name, value) for name, value in raw.items()}


def _device(name: str, value: Any) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        if value in OFFLOAD:
            return value
        if value.startswith("cuda:") and value[5:].isdigit():
            return int(value[5:])
    raise SpecdecError(f"module {name!r}: device {value!r} is not a GPU index (0, 1, ... or 'cuda:N'), 'cpu' or 'disk'")


def gpus_used(device_map: DeviceMap) -> set[int]:
    """GPU indices an explicit map names (a strategy uses whatever GPUs are visible)."""
    return set() if isinstance(device_map, str) else {d for d in device_map.values() if isinstance(d, int)}


def check_device_map(device_map: DeviceMap, model_path: str | Path) -> None:
    """Refuse, in one line, a map that cannot load: a GPU this machine does not have, a module
    the model does not have, or weights no entry covers. Reads only config.json."""
    missing_gpus = sorted(g for g in gpus_used(device_map) if g >= torch.cuda.device_count())
    if missing_gpus:
        raise SpecdecError(f"GPU {missing_gpus[0]} is named but this machine has {torch.cuda.device_count()} "
                         "visible CUDA device(s)")
    if isinstance(device_map, str):
        return
    modules, parameters = module_tree(model_path)
    unknown = [name for name in device_map if name and name not in modules]
    if unknown:
        raise SpecdecError(f"the model has no module {unknown[0]!r} (top-level modules: "
                         f"{', '.join(sorted(n for n in modules if n and '.' not in n))})")
    uncovered = [p for p in parameters if owner(device_map, p) is None]
    if uncovered:
        raise SpecdecError(f"no entry covers the weight {uncovered[0]!r} (and {len(uncovered) - 1} more): name its "
                         "module or a parent of it")


def module_tree(model_path: str | Path) -> tuple[set[str], list[str]]:
    """Module and parameter names of the model in `model_path`, built on the meta device."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_path)
    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(config)
    return {name for name, _ in model.named_modules()}, [name for name, _ in model.named_parameters()]


def owner(device_map: dict[str, Any], name: str) -> str | None:
    """The map entry covering module or parameter `name`: the longest key that is `name` or a
    dotted prefix of it ("" covers everything); None when no key covers it."""
    best = None
    for key in device_map:
        if key == "" or name == key or name.startswith(key + "."):
            if best is None or len(key) > len(best):
                best = key
    return best


def _module_name(model: torch.nn.Module, module: torch.nn.Module) -> str:
    for name, m in model.named_modules():
        if m is module:
            return name
    raise ValueError("module is not part of the model")


def dispatched(model: torch.nn.Module) -> bool:
    """Whether accelerate spread `model` over several devices (or disk) with hooks."""
    devices = set((getattr(model, "hf_device_map", None) or {}).values())
    return len(devices) > 1 or "disk" in devices


def execution_device(model: torch.nn.Module, module: torch.nn.Module) -> torch.device:
    """Where `module` of a dispatched model computes: the execution device accelerate's hook
    gives it (on `module` or the ancestor its map entry names)."""
    name = _module_name(model, module)
    while True:
        hook = getattr(model.get_submodule(name), "_hf_hook", None)
        for h in getattr(hook, "hooks", [hook]):
            device = getattr(h, "execution_device", None)
            if device is not None:
                return torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        if not name:
            break
        name = name.rpartition(".")[0]
    return next(p.device for p in module.parameters())


def input_device(model: torch.nn.Module) -> torch.device:
    """Where input ids go: the device the input embeddings compute on (model.device unless the
    model is dispatched over several devices)."""
    return execution_device(model, model.get_input_embeddings()) if dispatched(model) else model.device


def output_device(model: torch.nn.Module) -> torch.device:
    """Where the logits come out: generators that sample from them live here. accelerate hooks
    a dispatched model's root with io_same_device, which returns the outputs to the device the
    inputs came from (the input device); without that hook they stay where the output layer
    computed."""
    if not dispatched(model):
        return model.device
    root = getattr(model, "_hf_hook", None)
    if any(getattr(h, "io_same_device", False) for h in getattr(root, "hooks", [root])):
        return input_device(model)
    return execution_device(model, model.get_output_embeddings())
