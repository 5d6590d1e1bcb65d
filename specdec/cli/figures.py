"""`specdec figures`: the paper's figures and tables from the simulator, or the BPD paper's from a
saved lattice study. Thin: parse, read (`specdec.costfiles`), draw (`specdec.figures`, the only
place matplotlib is imported), print the paths written."""
from __future__ import annotations

from pathlib import Path

import click

from specdec.cli.outputs import OutputPath, check_out_dir
from specdec.paths import publishing


@click.command()
@click.option("--out", type=OutputPath(file_okay=False, path_type=Path), required=True,
              help="Folder for the PNG figures and Markdown tables (created if missing).")
@click.option("--lattice", "study_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Instead: the BPD paper's Figures 6 and 7 and Tables 3/4/5/9 from a saved lattice study "
                   "(`specdec heads lattice --save`).")
def figures(out: Path, study_path: Path | None) -> None:
    """Reproduce the paper's Figures 2-4, Table 1 and Table 4's EXP column from the simulator.

    Also draws the extensions (verify-cost curve, per-position acceptance). Prints the
    paths written.
    """
    check_out_dir(out)
    if study_path is not None:
        from specdec.costfiles import STUDY_FOR_FIGURES, read_lattice_study
        from specdec.errors import SpecdecError
        from specdec.figures.lattice import write_lattice
        try:
            study = read_lattice_study(study_path, STUDY_FOR_FIGURES)
        except SpecdecError as exc:
            raise click.BadParameter(str(exc), param_hint="--lattice") from None
        empty = [key for key in STUDY_FOR_FIGURES if not study[key]]
        if empty or not any(isinstance(r, dict) and r.get("method") == "base" for r in study["block_efficiency"]):
            raise click.BadParameter(f"{study_path}: nothing to draw: {', '.join(empty) or 'block_efficiency'} "
                                     f"{'hold' if len(empty) > 1 else 'holds'} no rows (a study of the base heads "
                                     "needs its 'base' row)", param_hint="--lattice")
        with publishing(out) as work:  # the figures and tables replace the old ones together
            paths = write_lattice(study, work)
    else:
        from specdec.figures.theory import write_all  # matplotlib is imported here only
        with publishing(out) as work:
            paths = write_all(work)
    for path in paths:
        click.echo(str(out / Path(path).name))
