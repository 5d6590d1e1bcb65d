"""Prompt sources (JSON lines of turns, plain lines), the chat template, refusing and
left-truncating long prompts, the embedded workloads' splits, and the per-category round trip
through `specdec estimate` and `specdec validate` on a tiny model with a chat template."""
from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from specdec.cli import cli
from specdec.errors import SpecdecError
from specdec.reference.data.prompt_sources import read_prompts_file, select_categories
from specdec.reference.data.prompts import PromptSource, encode_prompt, encode_prompts
from tests.cli_helpers import refuse_constant
from tests.fakes import word_tokenizer

TEMPLATE = ("{% for m in messages %}w59 {{ m['content'] }} w60{% endfor %}"
            "{% if add_generation_prompt %} w61{% endif %}")
TURNS = [  # MT-bench / Spec-Bench layout: newlines inside the turns, a category each
    {"question_id": 81, "category": "code", "turns": ["w1 w2 w3\nw4 w5 w6\nw1 w2 w3 w4", "w9 w9"]},
    {"question_id": 82, "category": "code", "turns": ["w7 w8\n\nw7 w8 w7 w8 w9 w10"]},
    {"question_id": 91, "category": "chat", "turns": ["w20 w21 w22 w23\nw24 w25"]},
    {"question_id": 92, "category": "chat", "turns": ["w30 w31 w32 w33 w34 w35 w36"]},
]


def _templated():
    tok = word_tokenizer()
    tok.chat_template = TEMPLATE
    return tok


def _write_turns(path) -> None:
    path.write_text("\n".join(json.dumps(row) for row in TURNS) + "\n", encoding="utf-8")


def test_json_lines_keep_newlines_categories_and_first_turn(tmp_path) -> None:
    path = tmp_path / "questions.jsonl"
    _write_turns(path)
    prompts = read_prompts_file(path)
    assert [p.text for p in prompts] == [row["turns"][0] for row in TURNS]
    assert [p.category for p in prompts] == ["code", "code", "chat", "chat"] and all(p.turn for p in prompts)
    assert prompts[0].name == "questions.jsonl:81" and "\n" in prompts[0].text
    assert [p.text for p in select_categories(prompts, ["chat"])] == [TURNS[2]["turns"][0], TURNS[3]["turns"][0]]
    with pytest.raises(SpecdecError, match="no prompt of category 'math'.*chat, code"):
        select_categories(prompts, ["math"])


def test_plain_lines_and_prompt_objects(tmp_path) -> None:
    plain = tmp_path / "p.txt"
    plain.write_text("w1 w2\n\n  w3 w4  \n", encoding="utf-8")
    assert [(p.text, p.category, p.turn) for p in read_prompts_file(plain)] == [("w1 w2", "file", False),
                                                                               ("w3 w4", "file", False)]
    objs = tmp_path / "p.jsonl"
    objs.write_text('{"prompt": "w1\\nw2", "category": "rag"}\n{"prompt": "w5", "turn": false}\n', encoding="utf-8")
    got = read_prompts_file(objs)
    assert [(p.text, p.category, p.turn) for p in got] == [("w1\nw2", "rag", True), ("w5", "file", False)]


@pytest.mark.parametrize("line, message", [
    ('{"turns": [1, 2]}', "turns"), ('{"category": "x"}', "needs"), ("[1, 2]", "JSON object"),
    ('{"prompt": "   "}', "empty"), ('{"prompt": "w1", "category": ""}', "category"), ("{oops", "not JSON"),
    ('{"prompt": "a \\ud800 b"}', "lone surrogate"), ('{"turns": ["\\udfff"], "category": "x"}', "lone surrogate"),
    ('{"prompt": "w1", "category": "\\ud83d"}', "lone surrogate"),
    ('{"prompt": "w1", "id": 1' + "0" * 5000 + "}", "Python can hold")])
def test_bad_json_lines_name_the_line(tmp_path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "w1"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(SpecdecError, match=f"line 2.*{message}"):
        read_prompts_file(path)


def test_chat_template_applies_to_turns_only(tmp_path) -> None:
    tok = _templated()
    path = tmp_path / "q.jsonl"
    _write_turns(path)
    turn = read_prompts_file(path)[3]
    ids, cut = encode_prompt(tok, turn, "auto", 100, "refuse")
    assert not cut and tok.decode(ids) == "w59 w30 w31 w32 w33 w34 w35 w36 w60 w61"
    plain, _ = encode_prompt(tok, turn, "none", 100, "refuse")
    assert tok.decode(plain) == "w30 w31 w32 w33 w34 w35 w36"
    encoded = encode_prompts(tok, read_prompts_file(path), PromptSource(file=path))
    assert encoded.chat_template and encoded.categories == ["code", "code", "chat", "chat"]
    assert encoded.describe()["categories"]["chat"] == {"prompts": 2, "median_tokens": 10, "max_tokens": 10}
    no_template = word_tokenizer()  # a tokenizer without a template: auto leaves turns as they are
    assert encode_prompt(no_template, turn, "auto", 100, "refuse")[0] == plain


def test_long_prompts_are_refused_or_cut_from_the_start(tmp_path) -> None:
    tok = _templated()
    path = tmp_path / "q.jsonl"
    _write_turns(path)
    long = read_prompts_file(path)[3]  # 7 content tokens + 3 of template = 10
    with pytest.raises(SpecdecError, match="10 tokens, more than --max-prompt-tokens 8.*--truncate left"):
        encode_prompt(tok, long, "auto", 8, "refuse")
    ids, cut = encode_prompt(tok, long, "auto", 8, "left")
    assert cut and tok.decode(ids) == "w59 w32 w33 w34 w35 w36 w60 w61"  # the start of the content went
    with pytest.raises(SpecdecError, match="template alone"):
        encode_prompt(tok, long, "auto", 3, "left")
    source = PromptSource(file=path, max_prompt_tokens=8, truncate="left")
    encoded = encode_prompts(tok, read_prompts_file(path), source)
    assert encoded.truncated == 4 and all(len(x) == 8 for x in encoded.ids)  # 13, 11, 9 and 10 tokens: all cut


def test_workload_splits_are_disjoint_and_instructions_come_last() -> None:
    from specdec.reference.data.workloads import WORKLOADS, parse_workloads, workload_prompts

    assert parse_workloads("all") == WORKLOADS and parse_workloads("edit,code") == ("code", "edit")
    with pytest.raises(SpecdecError, match="unknown workload 'math'"):
        parse_workloads("code,math")
    for name in ("code", "summarize", "rag", "edit", "chat"):
        held = workload_prompts(name, 12)
        train = workload_prompts(name, 12, heldout=False)
        assert len(held) == 12 and all(p.category == name and p.turn for p in held)
        assert not {p.name for p in held} & {p.name for p in train}, name
        assert not {p.text for p in held} & {p.text for p in train}, name
        if name != "chat":
            assert all(p.text.rstrip().endswith(("?", ".")) and "\n\n" in p.text for p in held), name
    assert workload_prompts("edit", 3) == workload_prompts("edit", 3)  # deterministic


@pytest.fixture(scope="module")
def templated_pair(tiny_pair, tmp_path_factory):
    root = tmp_path_factory.mktemp("templated")
    target = root / "target"
    shutil.copytree(tiny_pair.target, target)
    _templated().save_pretrained(target)
    questions = root / "questions.jsonl"
    rows = [{"question_id": i, "category": ("code", "chat")[i % 2],
             "turns": [" ".join(f"w{(5 * i + j) % 50}" for j in range(6)) + "\n" + " ".join(f"w{j}" for j in range(4))]}
            for i in range(8)]
    questions.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return target, questions, tiny_pair.draft


def _json(args: list[str]) -> dict:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout, parse_constant=refuse_constant)


def test_estimate_reports_each_category(templated_pair) -> None:
    target, questions, draft = templated_pair
    d = _json(["estimate", "--target", str(target), "--prompts-file", str(questions), "--drafter", f"model:{draft}",
               "--tokens", "40", "--new-tokens", "10", "--no-timing", "--json"])
    assert d["prompt_set"]["chat_template"] and set(d["categories"]) == {"code", "chat"}
    for category, r in d["categories"].items():
        assert r["category"] == category and r["prompts"] == 4 and r["n_positions"] == 40
        assert r["prompt_tokens"] == 13  # 10 content tokens + w59, w60, w61 of the template
        assert 0 <= r["alpha_ci"][0] <= r["alpha"] <= r["alpha_ci"][1] <= 1
    one = _json(["estimate", "--target", str(target), "--prompts-file", str(questions), "--drafter", f"model:{draft}",
                 "--tokens", "40", "--new-tokens", "10", "--no-timing", "--category", "chat", "--json"])
    assert one["category"] == "chat" and one["alpha"] == d["categories"]["chat"]["alpha"]  # the same prompts, seed


def test_validate_reports_each_category_and_the_decisions(templated_pair, tmp_path) -> None:
    target, questions, draft = templated_pair
    d = _json(["validate", "--target", str(target), "--prompts-file", str(questions), "--drafter", f"tiny=model:{draft}",
               "--drafter", "lookup:2", "--gammas", "1,2", "--temperatures", "0", "--prompts", "2", "--new-tokens", "8",
               "--alpha-tokens", "16", "--alpha-new-tokens", "8", "--max-k", "4", "--timing-repeats", "2",
               "--sweep-repeats", "0", "--retries", "0", "--out", str(tmp_path / "out"), "--json"])
    assert set(d["categories"]) == {"code", "chat"} and d["prompt_set"]["chat_template"]
    assert d["configurations"] == 8 and all(len(c["rows"]) == 4 for c in d["categories"].values())
    assert {(x["category"], x["temperature"]) for x in d["decisions"]} == {("code", 0.0), ("chat", 0.0)}
    for x in d["decisions"]:
        assert x["best_measured"] >= x["pick_measured"] and 0 <= x["regret"] < 1
    text = (tmp_path / "out" / "validation.md").read_text()
    assert "| method | T | gamma | code | chat | overall (mean) |" in text and "regret" in text
    assert (tmp_path / "out" / "validation_by_category.png").stat().st_size > 0


def test_prompt_errors_are_usage_errors_before_loading(templated_pair, tmp_path) -> None:
    target, questions, _ = templated_pair
    base = ["estimate", "--target", str(target), "--drafter", "lookup", "--no-timing", "--tokens", "20",
            "--new-tokens", "10"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"turns": "not a list"}\n', encoding="utf-8")
    for extra, option, words in ((["--prompts-file", str(bad)], "--prompts-file", "line 1"),
                                 (["--prompts-file", str(questions), "--category", "math"], "--category", "math"),
                                 (["--prompts-file", str(questions), "--max-prompt-tokens", "8"], "--max-prompt-tokens",
                                  "--truncate left"),
                                 (["--prompts-file", str(questions), "--workload", "code"], "--workload", "not both"),
                                 (["--workload", "maths"], "--workload", "unknown workload")):
        result = CliRunner().invoke(cli, base + extra)
        assert result.exit_code == 2, (extra, result.output)
        assert option in result.output and words in result.output and "Traceback" not in result.output
    cut = _json(base + ["--prompts-file", str(questions), "--max-prompt-tokens", "8", "--truncate", "left", "--json"])
    assert cut["prompt_set"]["truncated"] == 4  # 2 prompts of each category (20 tokens / 10), all 13 tokens long
    assert all(r["prompt_tokens"] == 8 for r in cut["categories"].values())


def test_learned_drafters_train_on_the_targets_answers_to_training_prompts_only(templated_pair, tmp_path) -> None:
    """The aligned corpus of workload prompts: the target's answers, each line beside the
    templated prompt it answers, every trained-on workload present, no held-out prompt among them;
    the heads' windows are the answers' tails after their prompts."""
    import hashlib
    from dataclasses import asdict

    from specdec.reference.data.aligned_corpus import AlignedConfig, aligned_dir, generate_aligned
    from specdec.reference.data.corpus import CORPUS_VERSION
    from specdec.reference.data.workloads import TRAINED_ON, training_prompts, workload_prompts
    from specdec.reference.heads.data import tail_windows

    prompts = training_prompts(4)
    assert [p.category for p in prompts[:5]] == list(TRAINED_ON) and len(prompts) == 20
    held = {p.name for name in TRAINED_ON for p in workload_prompts(name, 20)}
    assert not held & {p.name for p in training_prompts(20)}
    chats = [p.name for p in training_prompts(50, ("chat",))]  # the chat split holds fewer than 50 questions
    cycled = [p.name for p in training_prompts(50, ("chat",), cycle=True)]
    assert len(chats) < 50 and cycled[:len(chats)] == chats == cycled[len(chats):2 * len(chats)] and len(cycled) == 50
    target = templated_pair[0]
    config = AlignedConfig(tokens=60, max_new_tokens=6, batch_size=10, prompts="workloads")
    corpus = generate_aligned(target, config, cache_dir=tmp_path)
    answers = [line.split() for line in corpus.path.read_text().splitlines()]
    asked = [line.split() for line in corpus.prompts_path.read_text().splitlines()]
    assert len(answers) == len(asked) == len(corpus.meta["line_categories"]) >= 10
    assert set(corpus.meta["line_categories"]) == set(TRAINED_ON) and corpus.meta["tokens"] >= 60
    assert all(p[0] == "59" and p[-1] == str(_templated().convert_tokens_to_ids("w61")) for p in asked)  # templated
    assert generate_aligned(target, config, cache_dir=tmp_path).meta == corpus.meta  # cached
    plain = aligned_dir(AlignedConfig(), target, tmp_path)  # the corpus kind keeps the caches made before the field
    key = json.dumps({"config": {k: v for k, v in asdict(AlignedConfig()).items() if k != "prompts"},
                      "model": target.name, "corpus": CORPUS_VERSION}, sort_keys=True)
    assert plain.name == hashlib.sha1(key.encode()).hexdigest()[:12] and plain != corpus.path.parent
    assert tail_windows([[1, 2, 3, 4, 5], [1, 2]], 3) == [[3, 4, 5]]
