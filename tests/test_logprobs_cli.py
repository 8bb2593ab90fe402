"""--logprobs, divergence in compare and gate, and --teacher-force, against a fake server
that returns scripted log-probabilities: identical, perturbed by a known amount, refusing."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_server import Behaviour, FakeServer

from kveval.formats.reader import read_run
from tests.clirun import kveval

ANSWER = "red green blue"
TOKENS = ["red", " green", " blue"]
BASE_TOP = {"x": math.log(0.6), "y": math.log(0.3)}  # each position: the answer token is "x"
MOVED_TOP = {"x": math.log(0.5), "y": math.log(0.4)}
KL_MOVED = 0.6 * math.log(0.6 / 0.5) + 0.3 * math.log(0.3 / 0.4)  # the rest, 0.1, is unmoved
PROMPTS = 12


def tops_for(top: dict[str, float]) -> list[dict[str, float]]:
    """The answer tokens' own top-K: each token first, then the scripted alternatives."""
    return [{tok: max(top.values()), **{k: v for k, v in top.items() if k != "x"}}
            for tok in TOKENS]


def scripted(top: dict[str, float]) -> Callable[[dict[str, Any], str], Any]:
    """Chat: `content` objects; completions: legacy parallel lists."""
    def logprobs(body: dict[str, Any], text: str) -> Any:
        tops = tops_for(top)
        if "messages" in body:
            return {"content": [{"token": tok, "logprob": max(top.values()), "top_logprobs": [
                {"token": t, "logprob": v} for t, v in alt.items()]}
                for tok, alt in zip(TOKENS, tops, strict=True)]}
        return {"tokens": TOKENS, "token_logprobs": [max(top.values())] * 3,
                "top_logprobs": tops, "text_offset": [0, 3, 9]}
    return logprobs


def serve(top: dict[str, float] | None, **kw: Any) -> FakeServer:
    return FakeServer(Behaviour(answer=lambda body: ANSWER,
                                logprobs=scripted(top) if top else None, **kw))


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(f"Name three colours, take {i}." for i in range(PROMPTS)) + "\n")
    return path


def run(capsys: Any, server: FakeServer, prompts: Path, out: Path, *extra: str) -> tuple:
    return kveval(capsys, "run", "--endpoint", server.base_url, "--task", "prompts",
                  "--prompts", str(prompts), "-o", str(out), *extra)


def test_chat_run_asks_for_top_k_and_records_parallel_arrays(
        capsys: Any, prompts: Path, tmp_path: Path) -> None:
    with serve(BASE_TOP) as server:
        code, _, err = run(capsys, server, prompts, tmp_path / "a.jsonl", "--logprobs", "2")
    assert code == 0, err
    assert all(r["logprobs"] is True and r["top_logprobs"] == 2 for r in server.requests)
    item = read_run(tmp_path / "a.jsonl").items[0]
    assert item.logprobs is not None
    assert item.logprobs["tokens"] == TOKENS
    assert item.logprobs["top_tokens"][1] == [" green", "y"]
    assert item.logprobs["top_logprobs"][1] == [math.log(0.6), math.log(0.3)]  # full precision


def test_completions_run_reads_the_legacy_shape(capsys: Any, prompts: Path,
                                                tmp_path: Path) -> None:
    with serve(BASE_TOP) as server:
        code, _, err = run(capsys, server, prompts, tmp_path / "a.jsonl", "--logprobs", "2",
                           "--api", "completions")
    assert code == 0, err
    assert all(r["logprobs"] == 2 and "top_logprobs" not in r for r in server.requests)
    assert read_run(tmp_path / "a.jsonl").items[0].logprobs["tokens"] == TOKENS


def test_without_the_flag_nothing_is_asked_or_recorded(capsys: Any, prompts: Path,
                                                       tmp_path: Path) -> None:
    with serve(BASE_TOP) as server:
        code, _, _ = run(capsys, server, prompts, tmp_path / "a.jsonl")
    assert code == 0
    assert not any("logprobs" in r for r in server.requests)
    assert read_run(tmp_path / "a.jsonl").items[0].logprobs is None


def test_a_refusing_server_is_one_line_at_preflight(capsys: Any, prompts: Path,
                                                    tmp_path: Path) -> None:
    message = "Requested sample logprobs of 30, which is greater than max allowed: 20"
    with serve(BASE_TOP, status_for=lambda body: 400 if body.get("logprobs") else None,
               error_message=message) as server:
        code, out, err = run(capsys, server, prompts, tmp_path / "a.jsonl", "--logprobs", "30")
    assert code == 2
    assert "refuses --logprobs 30" in err and message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "a.jsonl").exists()


def test_a_server_that_ignores_the_request_stops_the_run(capsys: Any, prompts: Path,
                                                         tmp_path: Path) -> None:
    with serve(None) as server:
        code, _, err = run(capsys, server, prompts, tmp_path / "a.jsonl", "--logprobs", "2")
    assert code == 2
    assert "returned no log-probabilities" in err


@pytest.fixture
def three_runs(capsys: Any, prompts: Path, tmp_path: Path) -> dict[str, Path]:
    paths = {}
    for label, top in (("base", BASE_TOP), ("noise", BASE_TOP), ("cand", MOVED_TOP)):
        paths[label] = tmp_path / f"{label}.jsonl"
        with serve(top) as server:
            code, _, err = run(capsys, server, prompts, paths[label], "--logprobs", "2",
                               "--label", label)
        assert code == 0, err
    return paths


def test_compare_measures_the_known_perturbation_against_the_noise_floor(
        capsys: Any, three_runs: dict[str, Path]) -> None:
    p = three_runs
    code, out, _ = kveval(capsys, "compare", str(p["base"]), str(p["cand"]), "--noise",
                          str(p["noise"]), "--json")
    assert code == 0
    div = json.loads(out)["tasks"][0]["divergence"]
    assert div["kl_mean"] == pytest.approx(KL_MOVED, rel=1e-3)
    assert div["positions"] == PROMPTS * len(TOKENS)
    assert div["top1_agreement"] == 1.0
    assert div["dlogp_mean"] == pytest.approx(math.log(0.6 / 0.5), abs=1e-3)
    assert div["flip_margin_median"] is None
    assert div["noise"]["kl_mean"] == 0
    assert div["test"]["p_value"] < 0.001 and div["test"]["beyond_floor"]
    assert div["test"]["in_family"] is True  # a check of the one family
    assert div["test"]["gating"] is False  # without --max-kl it fails nothing
    code, text, _ = kveval(capsys, "compare", str(p["base"]), str(p["cand"]), "--noise",
                           str(p["noise"]))
    assert "cand raised the per-item mean KL from 0 (noise) to 0.023 nats per token on 12 items " \
        "(the mean of each item's mean, every item weighing alike, where the table's KL mean " \
        "pools all positions;" in text
    assert "beyond the noise floor shown at alpha 0.05" in text
    assert ("next-token distributions moved beyond the noise floor: prompts KL +0.023 nats "
            "per token, per-item mean (from a floor of 0)") in text


def test_compare_without_log_probabilities_reports_none(capsys: Any, prompts: Path,
                                                        tmp_path: Path) -> None:
    with serve(None) as server:
        run(capsys, server, prompts, tmp_path / "a.jsonl")
    code, out, _ = kveval(capsys, "compare", str(tmp_path / "a.jsonl"),
                          str(tmp_path / "a.jsonl"), "--json")
    assert code == 0 and json.loads(out)["tasks"][0]["divergence"] is None


def test_gate_max_kl(capsys: Any, three_runs: dict[str, Path]) -> None:
    p = three_runs
    common = ["gate", "--baseline", str(p["base"]), "--candidate", str(p["cand"])]
    code, out, _ = kveval(capsys, *common, "--noise", str(p["noise"]), "--max-kl", "0.01")
    assert code == 1
    assert out.startswith("kveval gate: REGRESSION")
    assert "gate: REGRESSION in prompts (divergence)" in out and "gate: PASS" not in out
    code, out, _ = kveval(capsys, *common, "--noise", str(p["noise"]), "--max-kl", "0.1",
                          "--json")
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "pass"
    assert data["tasks"][0]["divergence"]["test"]["beyond_floor"] is False
    code, out, _ = kveval(capsys, *common, "--noise", str(p["noise"]))  # reported, not judged
    assert code == 0 and "raised the per-item mean KL" in out
    assert ("gate: PASS; next-token distributions moved beyond the noise floor: prompts KL "
            "+0.023 nats per token, per-item mean (from a floor of 0) (Holm-adjusted p = 0.") in out
    assert "Holm-adjusted over 1 check, p = " in out  # in the gate's one family
    code, _, err = kveval(capsys, *common, "--max-kl", "0.01")
    assert code == 2 and "--noise" in err


def test_max_kl_with_two_noise_runs_judges_against_their_mean(
        capsys: Any, three_runs: dict[str, Path], prompts: Path, tmp_path: Path) -> None:
    p, moved = three_runs, tmp_path / "moved.jsonl"
    with serve(MOVED_TOP) as server:  # a noise run that moves as far as the candidate
        run(capsys, server, prompts, moved, "--logprobs", "2", "--label", "moved")
    common = ["gate", "--baseline", str(p["base"]), "--candidate", str(p["cand"]),
              "--noise", str(p["noise"])]
    code, _, _ = kveval(capsys, *common, "--max-kl", "0.015")
    assert code == 1  # 0.023 nats above a floor of 0
    code, out, _ = kveval(capsys, *common, "--noise", str(moved), "--max-kl", "0.015", "--json")
    div = json.loads(out)["tasks"][0]["divergence"]
    assert div["test"]["noise_kl"] == pytest.approx(KL_MOVED / 2, rel=1e-3)
    assert div["test"]["noise_runs"] == 2 and [n["label"] for n in div["noise_runs"]] == \
        ["noise", "moved"]
    assert div["test"]["beyond_floor"] is False and code == 0
    code, text, _ = kveval(capsys, *common, "--noise", str(moved))
    assert "from 0.012 (mean of noise, moved) to 0.023 nats" in text


def test_gate_max_kl_needs_log_probabilities(capsys: Any, prompts: Path,
                                            tmp_path: Path) -> None:
    with serve(None) as server:
        run(capsys, server, prompts, tmp_path / "a.jsonl")
    a = str(tmp_path / "a.jsonl")
    code, _, err = kveval(capsys, "gate", "--baseline", a, "--candidate", a, "--noise", a,
                          "--max-kl", "0.01")
    assert code == 2 and "--logprobs" in err and "Traceback" not in err


def echo_logprobs(top: dict[str, float]) -> Callable[[dict[str, Any], str], Any]:
    """A vLLM-style echo: the prompt as one token, the answer's tokens, one generated token."""
    def logprobs(body: dict[str, Any], text: str) -> Any:
        prompt = body["prompt"][: -len(ANSWER)]
        offsets = [0] + [len(prompt) + o for o in (0, 3, 9)] + [len(body["prompt"])]
        gen = {"!": 0.0}
        return {"tokens": ["P", *TOKENS, "!"], "token_logprobs": [None, *[max(top.values())] * 3,
                                                                   0.0],
                "top_logprobs": [None, *tops_for(top), gen], "text_offset": offsets}
    return logprobs


def forced(top: dict[str, float]) -> FakeServer:
    return FakeServer(Behaviour(answer=lambda body: body["prompt"] + "!",
                                logprobs=echo_logprobs(top)))


def test_teacher_forcing_scores_the_baseline_answers(capsys: Any, prompts: Path,
                                                     tmp_path: Path) -> None:
    base = tmp_path / "base.jsonl"
    with serve(BASE_TOP) as server:
        run(capsys, server, prompts, base, "--logprobs", "2", "--api", "completions")
    with forced(MOVED_TOP) as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--teacher-force",
                              str(base), "--logprobs", "2", "-o", str(tmp_path / "tf.jsonl"))
        assert code == 0, err
        body = server.requests[-1]
    assert body["echo"] is True and body["max_tokens"] == 1 and body["logprobs"] == 2
    assert body["prompt"].endswith(ANSWER)
    base_items = read_run(base).by_key()
    tf = read_run(tmp_path / "tf.jsonl")
    assert len(tf.items) == PROMPTS
    for item in tf.items:
        assert item.output == ANSWER
        assert item.prompt_sha256 == base_items[item.key].prompt_sha256
        assert item.logprobs["tokens"] == TOKENS  # the prompt and the generated token cut off
    code, out, _ = kveval(capsys, "compare", str(base), str(tmp_path / "tf.jsonl"), "--json")
    assert json.loads(out)["tasks"][0]["divergence"]["kl_mean"] == pytest.approx(KL_MOVED,
                                                                                  rel=1e-3)


def test_teacher_forcing_a_chat_run_on_another_server_is_refused(
        capsys: Any, prompts: Path, tmp_path: Path) -> None:
    base = tmp_path / "base.jsonl"
    with serve(BASE_TOP) as server:
        run(capsys, server, prompts, base)
    with forced(BASE_TOP) as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--teacher-force",
                              str(base), "-o", str(tmp_path / "tf.jsonl"))
    assert code == 2
    assert "chat template" in err and len(err.strip().splitlines()) == 1


def test_teacher_forcing_on_a_server_that_does_not_echo(capsys: Any, prompts: Path,
                                                        tmp_path: Path) -> None:
    base = tmp_path / "base.jsonl"
    with serve(BASE_TOP) as server:
        run(capsys, server, prompts, base, "--api", "completions")
    with serve(BASE_TOP) as server:  # answers, but returns only the generated tokens
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--teacher-force",
                              str(base), "-o", str(tmp_path / "tf.jsonl"))
    assert code == 2 and "cannot teacher-force" in err
    assert not (tmp_path / "tf.jsonl").exists()


def test_teacher_force_excludes_tasks(capsys: Any, tmp_path: Path) -> None:
    code, _, err = kveval(capsys, "run", "--teacher-force", str(tmp_path / "b.jsonl"),
                          "--task", "gsm8k")
    assert code == 2 and "drop --task" in err


def test_malformed_log_probabilities_in_a_file_are_one_line(
        capsys: Any, three_runs: dict[str, Path], tmp_path: Path) -> None:
    lines = three_runs["cand"].read_text().splitlines()
    item = json.loads(lines[1])
    item["logprobs"]["top_logprobs"][0] = ["not", "numbers"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], json.dumps(item), *lines[2:]]) + "\n")
    code, _, err = kveval(capsys, "compare", str(three_runs["base"]), str(bad))
    assert code == 2 and "bad.jsonl:2: logprobs.top_logprobs[0][0]" in err
    assert "Traceback" not in err
    item["logprobs"] = {"tokens": ["a"]}
    bad.write_text("\n".join([lines[0], json.dumps(item), *lines[2:]]) + "\n")
    code, _, err = kveval(capsys, "compare", str(three_runs["base"]), str(bad))
    assert code == 2 and "bad.jsonl:2: logprobs" in err


def test_teacher_forcing_limit_and_errors_in_the_baseline(capsys: Any, prompts: Path,
                                                          tmp_path: Path) -> None:
    base = tmp_path / "base.jsonl"
    with serve(BASE_TOP) as server:
        run(capsys, server, prompts, base, "--api", "completions")
    lines = base.read_text().splitlines()
    failed = json.loads(lines[1]) | {"status": "error", "output": None, "error": "HTTP 503"}
    base.write_text("\n".join([lines[0], json.dumps(failed), *lines[2:]]) + "\n")
    with forced(BASE_TOP) as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--teacher-force",
                              str(base), "--limit", "5", "-o", str(tmp_path / "tf.jsonl"))
    assert code == 0, err
    items = read_run(tmp_path / "tf.jsonl").items
    assert len(items) == 5  # the first five answered items; the failed one is not forced
    assert failed["item_id"] not in {item.item_id for item in items}


def test_the_page_shows_the_max_kl_verdict_and_the_divergence(
        capsys: Any, three_runs: dict[str, Path], tmp_path: Path) -> None:
    p, page = three_runs, tmp_path / "gate.html"
    code, _, _ = kveval(capsys, "gate", "--baseline", str(p["base"]), "--candidate",
                        str(p["cand"]), "--noise", str(p["noise"]), "--max-kl", "0.01",
                        "--html", str(page))
    html = page.read_text(encoding="utf-8")
    assert code == 1 and "REGRESSION" in html and "PASS" not in html.split("</header>")[0]
    assert "kl_mean" in html or "KL" in html
    report_page = tmp_path / "report.html"
    code, _, _ = kveval(capsys, "report", "--baseline", str(p["base"]), "--candidate",
                        str(p["cand"]), "--noise", str(p["noise"]), "-o", str(report_page))
    assert code == 0 and "raised the per-item mean KL" in report_page.read_text(encoding="utf-8")


def test_report_takes_max_kl_and_gives_the_gates_verdict(
        capsys: Any, three_runs: dict[str, Path], tmp_path: Path) -> None:
    p, page = three_runs, tmp_path / "report.html"
    args = ["--baseline", str(p["base"]), "--candidate", str(p["cand"]), "--noise",
            str(p["noise"]), "--max-kl", "0.01"]
    gate_code, _, _ = kveval(capsys, "gate", *args)
    code, out, _ = kveval(capsys, "report", *args, "-o", str(page))
    header = page.read_text(encoding="utf-8").split("</header>")[0]
    assert code == gate_code == 1 and out.strip() == str(page)
    assert "REGRESSION" in header and "PASS" not in header


@pytest.mark.parametrize("routes", [
    {},  # no /tokenize: not vLLM
    {"/tokenize": lambda body: {"count": 3}},
    {"/tokenize": lambda body: {"tokens": "1 2"}},
])
def test_a_server_without_a_tokenizer_gets_echo_and_no_chat(routes: dict[str, Any]) -> None:
    from kveval.run.forcing.method import Probe, chat_refusal, select

    with FakeServer(Behaviour(post_routes=routes)) as server:
        method = select(Probe(server.base_url, "m", None), {})
    assert method.name == "echo" and method.template is None
    assert "chat template" in chat_refusal(method) and "\n" not in chat_refusal(method)


def test_compare_prints_divergence_as_llama_perplexity_does(
        capsys: Any, three_runs: dict[str, Path]) -> None:
    p = three_runs
    args = ["compare", str(p["base"]), str(p["cand"]), "--noise", str(p["noise"])]
    code, out, _ = kveval(capsys, *args, "--json")
    div = json.loads(out)["tasks"][0]["divergence"]
    kld = div["kld"]
    assert code == 0 and kld["positions"] == div["positions"]
    assert kld["kl_mean"]["value"] == pytest.approx(div["kl_mean"])
    assert kld["same_top"]["value"] == pytest.approx(div["top1_agreement"])
    assert kld["kl"]["max"] >= kld["kl"]["p99.9"] >= kld["kl"]["p99"] >= kld["kl"]["median"]
    assert kld["capture_share"] == {"5": 0.73, "20": 0.87}
    code, text, _ = kveval(capsys, *args)
    assert "divergence as llama-perplexity --kl-divergence prints it" in text
    assert "mean KL ± se" in text and "captures about 73% of it at K = 5" in text
