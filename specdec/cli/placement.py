"""Where the models run: `--device-map` / `--draft-device-map`, and this process's rank and
device when torchrun started several. Everything here is checked before any weights load;
each problem is one line naming its option (exit status 2)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import click

from specdec.cli.common import stack
from specdec.cli.types import DeviceMap
from specdec.errors import SpecdecError
from specdec.reference.drafters.spec import split_label

MAP_HELP = ("auto, balanced, balanced_low_0, sequential, a JSON object {module: GPU index | \"cpu\" | \"disk\"} or a "
            ".json file holding one; passed to from_pretrained (accelerate) so the model spans several devices. "
            "Runs the eager backend. Default: the whole model on --device.")


device_map_options = stack(
    click.option("--device-map", "device_map", default=None, type=DeviceMap(), metavar="MAP",
                 help=f"Target placement: {MAP_HELP}"),
    click.option("--draft-device-map", "draft_device_map", default=None, type=DeviceMap(), metavar="MAP",
                 help="The same for a neural draft (--drafter model:PATH)."),
)


def resolve_placement(device: str, device_map: Any, draft_device_map: Any, backend: str, target: Path,
                      drafters: Sequence[str] = (), one_process: bool = False):
    """Check the placement options together, against the target folder, the drafters' specs and
    torchrun's environment, and return this rank's placement. one_process: the command does not
    split its work (torchrun with several processes is refused)."""
    import torch

    from specdec.reference.model.placement import check_device_map, gpus_used
    from specdec.reference.distributed.ranks import Placement, Ranks, rank_device
    from specdec.reference.drafters.spec import DrafterSpec

    try:
        ranks = Ranks.from_env()
    except SpecdecError as exc:
        raise click.UsageError(f"torchrun's environment: {exc}") from None
    if one_process and ranks.parallel:
        command = click.get_current_context().command_path
        raise click.UsageError(f"{command} runs in one process; under torchrun only `specdec estimate` and the alpha "
                               "part of `specdec validate` are split over processes")
    source = click.get_current_context().get_parameter_source("device")
    if device_map is not None and source is not None and source.name != "DEFAULT":
        raise click.BadParameter("give --device or --device-map, not both (a map names its devices)",
                                 param_hint="--device-map")
    for name, value in (("--device-map", device_map), ("--draft-device-map", draft_device_map)):
        if value is not None and backend == "fast":
            raise click.BadParameter("the fast backend runs on one CPU: use --target-backend eager or auto",
                                     param_hint=name)
        spans_gpus = value is not None and (gpus_used(value) or (isinstance(value, str) and torch.cuda.device_count()))
        if spans_gpus and ranks.local_world_size > 1:
            raise click.BadParameter(f"a map spans this node's GPUs, but torchrun started {ranks.local_world_size} "
                                     "processes on it: use --nproc-per-node 1 with a device map",
                                     param_hint=name)
    neural = [s for s in (DrafterSpec.parse(split_label(spec)[1]) for spec in drafters) if s.kind == "model"]
    if draft_device_map is not None and len(neural) != 1:
        raise click.BadParameter("applies to exactly one neural drafter (--drafter model:PATH)",
                                 param_hint="--draft-device-map")
    try:
        device = rank_device(device, ranks)
    except SpecdecError as exc:
        raise click.BadParameter(str(exc), param_hint="--device") from None
    for name, value, path in (("--device-map", device_map, target),
                              ("--draft-device-map", draft_device_map, neural[0].arg if neural else None)):
        if value is not None:
            try:
                check_device_map(value, path)
            except (OSError, SpecdecError) as exc:
                raise click.BadParameter(str(exc), param_hint=name) from None
    return Placement(ranks, device, device_map, draft_device_map)
