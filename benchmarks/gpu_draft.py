"""Issue 51: the distilled draft's larger sizes trained on a lent GPU (docs/draft-model.md, "Larger
sizes, trained on a GPU"), in three device calls, because the device machine reaches nothing, takes
at most 64 MiB a call and gives back at most 64 MiB a call in files of 16 MiB, and the target's
GGUF alone is 94 MiB:

    python benchmarks/gpu_draft.py stage gpu-stage            # here: the target's GGUF xz'd in two
                                                              # parts (a/, b/), the corpus' token files
    call 1 (carry gpu-stage/a): nothing to run but the start
    call 2 (carry gpu-stage/b): python3 benchmarks/gpu_draft.py train gpu-stage "$OUT" --layers 2,4 -- OPTIONS
    call 3: python3 benchmarks/gpu_draft.py give gpu-stage "$OUT"   # what call 2 could not give back
    python benchmarks/gpu_draft.py unpack FILES_AT... --out DIR   # here: each draft's folder rebuilt

`train` rebuilds the GGUF (its sha256 checked), converts it with specdec's one GGUF conversion (the
float32 folder's sha256 recorded beside this machine's), runs `specdec draft train --device cuda`
once per size with OPTIONS, and packs what each draft trained (its layers and final norm, float32,
exact) into files of at most 15 MiB; the embedding is the target's, tied and frozen, so `unpack`
takes it from this machine's target, after checking that the card's target weights (their sha256, as
`specdec draft export` checks them) are this machine's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
PART_BYTES = 15 << 20  # a packed file; the device gives back files of at most 16 MiB
GIVE_BYTES, GIVE_FILES = 62 << 20, 8  # what one call gives back
EMBEDDING = "model.embed_tokens.weight"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def stage(dest: Path) -> None:
    """Here: dest/a/target.xz.0, dest/b/target.xz.1, dest/b/corpus.tar.xz, dest/b/pylib (click, gguf),
    dest/b/manifest.json (the GGUF's and this machine's float32 conversion's sha256)."""
    sys.path.insert(0, str(ROOT))
    from specdec.paths import cache_dir, default_target_dir
    from specdec.reference.data.default_model import gguf_path

    src = gguf_path()
    (dest / "a").mkdir(parents=True, exist_ok=True)
    (dest / "b").mkdir(parents=True, exist_ok=True)
    packed = lzma.compress(src.read_bytes(), preset=9 | lzma.PRESET_EXTREME)
    half = len(packed) // 2
    (dest / "a" / "target.xz.0").write_bytes(packed[:half])
    (dest / "b" / "target.xz.1").write_bytes(packed[half:])
    corpus = cache_dir() / "corpus"
    tag = f"{default_target_dir().name}-"
    with tarfile.open(dest / "b" / "corpus.tar.xz", "w:xz") as tar:
        # the target's token files, its aligned answers, the corpus chunks and HumanEval (the workloads' prompts)
        for sub in ("tokens", "aligned"):
            for folder in sorted((corpus / sub).glob(tag + "*")):
                tar.add(folder, arcname=f"{sub}/{folder.name}")
        for name in ("text/chunks.jsonl", "text/meta.json", "raw/human-eval"):
            tar.add(corpus / name, arcname=name)
    for module in ("click", "gguf"):  # pure Python; used on the device only where its own python lacks them
        package = Path(__import__(module).__file__).parent
        shutil.copytree(package, dest / "b" / "pylib" / module, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    manifest = {"gguf_sha256": sha256(src),
                "target_safetensors_sha256": sha256(default_target_dir() / "model.safetensors")}
    (dest / "b" / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(json.dumps({"staged": str(dest), "xz_bytes": len(packed), **manifest}))


def site(work: Path) -> Path:
    """The package laid out as `specdec` by symlinks, as benchmarks/gpu_check.sh does (no install)."""
    top = work / "site"
    if not (top / "specdec").is_dir():
        shutil.copytree(ROOT / "specdec", top / "specdec", ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("simulator", "ngram", "figures", "reference", "engines"):
            (top / "specdec" / name).symlink_to(ROOT / name)
    return top


def pack(folder: Path, name: str, packed: Path) -> list[str]:
    """The draft's trained tensors (all but the embedding) in files of at most PART_BYTES, plus its
    card and config in NAME-meta.json."""
    from safetensors.torch import load_file, save_file

    tensors = {k: v for k, v in load_file(folder / "model.safetensors").items() if k != EMBEDDING}
    parts: list[dict] = [{}]
    size = 0
    for key in sorted(tensors):
        nbytes = tensors[key].numel() * tensors[key].element_size()
        if parts[-1] and size + nbytes > PART_BYTES - 4096:  # room for the header
            parts.append({})
            size = 0
        parts[-1][key] = tensors[key].contiguous()
        size += nbytes
    names = []
    for i, part in enumerate(parts):
        names.append(f"{name}-part{i}.safetensors")
        save_file(part, packed / names[-1])
    meta = {"card": json.loads((folder / "card.json").read_text()),
            "config": json.loads((folder / "config.json").read_text()),
            "generation_config": json.loads((folder / "generation_config.json").read_text()), "parts": names}
    (packed / f"{name}-meta.json").write_text(json.dumps(meta, indent=1))
    return names + [f"{name}-meta.json"]


def give(work: Path, out: Path) -> None:
    """Copy the packed files not yet given back into OUT, within one call's limits (metas first)."""
    packed = work / "packed"
    given_file = packed / "given.txt"
    given = set(given_file.read_text().split()) if given_file.exists() else set()
    files = sorted((p for p in packed.iterdir() if p.suffix in (".json", ".safetensors") and p.name not in given),
                   key=lambda p: (p.suffix != ".json", p.name))
    out.mkdir(parents=True, exist_ok=True)
    used = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    count = sum(1 for p in out.iterdir())
    for p in files:
        if count + 1 > GIVE_FILES or used + p.stat().st_size > GIVE_BYTES:
            continue
        shutil.copy(p, out / p.name)
        given.add(p.name)
        used += p.stat().st_size
        count += 1
    given_file.write_text("\n".join(sorted(given)) + "\n")
    left = [p.name for p in files if p.name not in given]
    print(f"given back: {sorted(given)}; left for another call: {left}", flush=True)


def train(work: Path, out: Path, layers: list[int], options: list[str], budget_s: float, device: str) -> None:
    start = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "gpu-draft.log", "a")

    def say(text: str) -> None:
        line = f"[{time.monotonic() - start:6.1f} s] {text}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    manifest = json.loads((work / "b" / "manifest.json").read_text())
    cache = work / "cache"
    gguf = work / GGUF
    if not gguf.is_file():
        data = lzma.decompress((work / "a" / "target.xz.0").read_bytes() + (work / "b" / "target.xz.1").read_bytes())
        gguf.write_bytes(data)
    got = sha256(gguf)
    same = got == manifest["gguf_sha256"]
    say(f"GGUF rebuilt: sha256 {got[:12]} ({'matches' if same else 'DIFFERS FROM'} the staged)")
    if not same:
        raise SystemExit(1)
    if not (cache / "corpus" / "tokens").is_dir():
        with tarfile.open(work / "b" / "corpus.tar.xz") as tar:
            tar.extractall(cache / "corpus", filter="data")
    paths = [str(site(work))]
    for module in ("click", "gguf"):
        if subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode:
            say(f"{module}: not on this machine, taken from the stage")
            paths.append(str(work / "b" / "pylib"))
            break
    env = {**os.environ, "SPECDEC_CACHE": str(cache), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])}
    target = cache / "models" / "smollm2-135m-instruct"
    convert = ("import sys; from pathlib import Path; from specdec.reference.model.gguf import convert_gguf; "
               "convert_gguf(Path(sys.argv[1]), Path(sys.argv[2]))")
    subprocess.run([sys.executable, "-c", convert, str(gguf), str(target)], env=env, check=True)
    converted = sha256(target / "model.safetensors")
    say(f"target converted: model.safetensors sha256 {converted[:12]} "
        f"({'equals' if converted == manifest['target_safetensors_sha256'] else 'differs from'} the staging machine's)")
    import torch
    environment = {"python": sys.version.split()[0], "torch": torch.__version__,
                   "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                   "target_safetensors_sha256": converted}
    say(f"environment: {json.dumps(environment)}")
    (work / "packed").mkdir(exist_ok=True)
    for n in layers:
        left = budget_s - (time.monotonic() - start)
        if left < 30:
            say(f"d{n}: not trained ({left:.0f} s of the budget left)")
            continue
        folder = work / "drafts" / f"d{n}"
        argv = [sys.executable, "-c", "from specdec.cli import main; main()", "draft", "train", "--target", str(target),
                "--out", str(folder), "--force", "--layers", str(n), "--device", device, "--json", *options]
        say("run: " + " ".join(argv[3:]))
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=left)
        except subprocess.TimeoutExpired:
            say(f"d{n}: stopped at the budget")
            continue
        log.write(done.stderr[-4000:])
        if done.returncode != 0:
            say(f"d{n}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:] }")
            continue
        card = json.loads(done.stdout)
        held = card["held_out"]
        alpha = {w: round(r["alpha"], 3) for w, r in (card.get("alpha") or {}).get("workloads", {}).items()}
        say(f"d{n}: held-out top-1 {held['untrained']['top1']:.3f} -> {held['trained']['top1']:.3f}, "
            f"alpha {json.dumps(alpha)}, seconds {json.dumps(card['seconds'])}")
        names = pack(folder, f"d{n}", work / "packed")
        say(f"d{n}: packed as {names}")
    log.close()


def unpack(sources: list[Path], dest: Path, target: Path | None = None) -> None:
    """Here: each NAME-meta.json with its parts becomes DEST/NAME, a model folder `model:` loads, its
    embedding (and tokenizer files) taken from `target` (default: this machine's default target)."""
    sys.path.insert(0, str(ROOT))
    from safetensors.torch import load_file, save_file
    from specdec.paths import default_target_dir
    from specdec.reference.heads.store import weights_fingerprint

    files = {p.name: p for src in sources for p in Path(src).iterdir()}
    target = Path(target) if target is not None else default_target_dir()
    ours = weights_fingerprint(target)
    embedding = load_file(target / "model.safetensors")[EMBEDDING]
    for name in sorted(n for n in files if n.endswith("-meta.json")):
        meta = json.loads(files[name].read_text())
        draft = name[: -len("-meta.json")]
        missing = [p for p in meta["parts"] if p not in files]
        if missing:
            print(f"{draft}: parts not given back yet: {missing}")
            continue
        theirs = meta["card"].get("target", {}).get("weights_sha256")
        if theirs != ours:
            raise SystemExit(f"{draft}: trained against target weights {str(theirs)[:12]}, {target} has {ours[:12]}: "
                             "its embedding would not be the one it was trained with")
        tensors = {EMBEDDING: embedding}
        for part in meta["parts"]:
            tensors |= load_file(files[part])
        folder = dest / draft
        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in tensors.items()}, folder / "model.safetensors",
                  metadata={"format": "pt"})
        for key in ("card", "config", "generation_config"):
            (folder / f"{key}.json").write_text(json.dumps(meta[key], indent=1))
        for extra in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            if (target / extra).is_file():
                shutil.copy(target / extra, folder / extra)
        print(f"{draft}: {folder} ({sum(t.numel() for t in tensors.values()):,} parameters)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("stage").add_argument("dest", type=Path)
    t = sub.add_parser("train")
    t.add_argument("work", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument("--layers", default="2,4")
    t.add_argument("--budget-s", type=float, default=400)
    t.add_argument("--device", default="cuda")
    g = sub.add_parser("give")
    g.add_argument("work", type=Path)
    g.add_argument("out", type=Path)
    u = sub.add_parser("unpack")
    u.add_argument("sources", type=Path, nargs="+")
    u.add_argument("--out", type=Path, required=True)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # after "--": `specdec draft train`'s options
    args, options = parser.parse_args(argv[:cut]), argv[cut + 1:]
    if args.verb == "stage":
        stage(args.dest)
    elif args.verb == "train":
        train(args.work, args.out, [int(x) for x in args.layers.split(",")], options, args.budget_s, args.device)
        give(args.work, args.out)
    elif args.verb == "give":
        give(args.work, args.out)
    else:
        unpack(args.sources, args.out)


if __name__ == "__main__":
    main()
