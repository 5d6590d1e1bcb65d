"""Where things go and how they are written (specdec.paths): every folder follows
$SPECDEC_CACHE even when it changes after import; a file written atomically is either the old
one or the new one, never half of one, and no temporary file is left behind; the fast kernel's
build folder is keyed by the CPU's instruction set (no compilation here)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specdec import paths
from specdec.ngram.tools import kenlm_bin_dir
from specdec.reference.data.aligned_corpus import AlignedConfig, aligned_dir
from specdec.reference.data.corpus import corpus_root

AVX512 = "-march= skylake-avx512\n-mavx2 [enabled]\n-mavx512f [enabled]"
AVX2 = "-march= znver2\n-mavx2 [enabled]"


def test_cache_follows_the_environment_after_import(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("SPECDEC_KENLM_BIN", raising=False)
    for root in (tmp_path / "a", tmp_path / "b"):
        monkeypatch.setenv("SPECDEC_CACHE", str(root))
        assert paths.cache_dir() == root
        assert paths.default_target_dir() == root / "models" / "smollm2-135m-instruct"
        assert paths.corpus_dir() == corpus_root(None) == root / "corpus"
        assert kenlm_bin_dir() == paths.kenlm_bin_dir() == root / "kenlm" / "bin"
        assert aligned_dir(AlignedConfig(), tmp_path / "model").parent.parent == root / "corpus" / "aligned"


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_write_atomic_text_and_bytes(tmp_path) -> None:
    target = tmp_path / "out.txt"
    assert paths.write_atomic(target, "é\n") == target and target.read_bytes() == "é\n".encode()
    paths.write_atomic(target, b"\x00\x01")
    assert contents(tmp_path) == {"out.txt": b"\x00\x01"}


@pytest.mark.parametrize("error", [KeyboardInterrupt, OSError])
def test_interrupted_write_keeps_the_old_file(tmp_path, error) -> None:
    target = tmp_path / "tables.npz"
    target.write_bytes(b"old")
    with pytest.raises(error):
        with paths.writing(target) as tmp, open(tmp, "wb") as f:
            np.savez(f, x=np.arange(3))
            raise error
    assert contents(tmp_path) == {"tables.npz": b"old"}


def test_writer_that_needs_a_name(tmp_path) -> None:
    target = tmp_path / "tables.npz"
    with paths.writing(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".tables.npz.tmp-")
        with open(tmp, "wb") as f:
            np.savez(f, x=np.arange(3))
    assert list(contents(tmp_path)) == ["tables.npz"]
    with np.load(target) as z:
        assert z["x"].tolist() == [0, 1, 2]


def test_kernel_build_folder_is_keyed_by_instruction_set(tmp_path, monkeypatch) -> None:
    build = pytest.importorskip("specdec.reference.model.kernel_build")
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    assert build.build_dir(AVX512) != build.build_dir(AVX2)
    assert build.build_dir(AVX2) == build.build_dir("-march= znver2\n-mavx2 [enabled]")
    assert build.build_dir(AVX2).parent == tmp_path / "torch_extensions"
    assert "znver2" in build.build_dir(AVX2).name and "skylake-avx512" in build.build_dir(AVX512).name
    assert build.build_dir() == build.build_dir(build.native_isa())  # this CPU's
